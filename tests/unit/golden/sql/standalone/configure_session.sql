SELECT set_config('TimeZone', 'UTC', false),
       set_config('DateStyle', 'ISO, MDY', false),
       set_config('work_mem', '64MB', false),
       set_config('max_parallel_workers_per_gather', '0', false),
       set_config('awa_beat.origin', %(origin)s, false);
