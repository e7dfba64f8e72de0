SELECT t AS table_name, to_regclass(t) IS NOT NULL AS present
  FROM unnest(%(tables)s::text[]) AS t;
