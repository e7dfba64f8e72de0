SELECT clock_timestamp() AS now;
