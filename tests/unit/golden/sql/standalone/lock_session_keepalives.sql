SELECT set_config('tcp_keepalives_idle', %(idle)s, false),
       set_config('tcp_keepalives_interval', %(interval)s, false),
       set_config('tcp_keepalives_count', %(count)s, false),
       set_config('tcp_user_timeout', %(user_timeout_ms)s, false);
