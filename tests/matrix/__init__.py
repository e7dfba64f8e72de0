"""The matrix suite: every schedule type through every surface that shows or changes it.

One schedule of every type (:mod:`tests.matrix.catalogue`) goes through beat, the Python
API, the CLI, the dashboard, the Django admin, the metrics and import/export, on both
table layouts. A new schedule type or surface is added here, not beside it: a new type is
one more :class:`~tests.matrix.catalogue.Entry` (every cell below then takes it in), a new
surface one more column of cells parametrised over ``NAMES``.

The catalogue (rows; ``config``: registered by a beat's sync of its beat_schedule,
``runtime``: written through ``awa_beat.Schedules``)::

    cron-zone         crontab 07:30 in Europe/Paris               config
    grid-interval     timedelta(minutes=10), stored as a cron     config
    offgrid-interval  7 s, stored as @every 7s                    config
    solar             solar("sunrise", Paris)                     config
    at                calendars.at(2031-01-01 09:00Z)             runtime
    rrule             dateutil rrule, weekly Mon and Wed 09:00    runtime
    crontab-and       crontab 09:00 on Friday the 13th (Celery    config
                      ANDs the day fields: stored as @crontab)
    crontab-dst-celery  crontab 02:30 New York, dst="celery"      runtime
    bound-start       hourly, start_time 2030-06-01               runtime
    bound-end         hourly, end_time 2035-01-01                 config
    bound-max-runs    hourly at :15, max_runs 3                   runtime
    one-off           daily 04:45, one_off                        runtime
    paused            "0 3 * * *", paused by an operator          config
    retired           every second, max_runs 2, both runs fired   runtime
                      by the engine's fire statement

The cells. Every row of the catalogue is in every cell unless a note says otherwise, and
every cell runs in both layouts (``standalone`` and ``awa``) unless it says otherwise
(``A1-4``: A1 to A4)::

    type \\ surface   beat    API    CLI      dashboard  admin    metrics  export  preview
    cron-zone         B1 B2   A1-4   C1-6     W1-4       D1-5     M1       E1-3    P1-4
    grid-interval     B1 B2   A1-4   C1-6     W1-4       D1-5     M1       E1-3    P1-4
    offgrid-interval  B1 B2*  A1-4   C1-6     W1-4       D1-5     M1       E1-3*   P1-4
    solar             B1 B2   A1-4   C1-6     W1-4       D1-5     M1       E1-3    P1-4
    at                B1 B2   A1-4   C1-6     W1-5       D1-6     M1       E1-3    P1-4
    rrule             B1 B2   A1-4   C1-6     W1-5       D1-6     M1       E1-3    P1-4
    crontab-and       B1 B2   A1-4   C1-4 C6  W1-3       D1-4     M1       E1-3    P1-4
    crontab-dst-celery
                      B1 B2   A1-4   C1-4 C6  W1-3 W5    D1-4 D6  M1       E1-3    P1-4
    bound-start       B1 B2   A1-4   C1-6     W1-5       D1-6     M1       E1-3    P1-4
    bound-end         B1 B2   A1-4   C1-6     W1-4       D1-5     M1       E1-3    P1-4
    bound-max-runs    B1 B2   A1-4   C1-6     W1-5       D1-6     M1       E1-3    P1-4
    one-off           B1 B2   A1-4   C1-6     W1-5       D1-6     M1       E1-3    P1-4
    paused            B1 B2   A1-4   C1-6     W1-4       D1-5     M1       E1-3    P1-4
    retired           B1 B2   A1-4   C1-4 C6  W1-3 W5    D1-4 D6  M1       E1-3    P1-4

``*``: the cell fires that schedule for real (the others are checked not to fire out of
their calendar). Retired is a state the fire statement leaves, so no surface adds one
(C5, W4, D5), nor do the add cells take in the two @crontab rows yet. M2 checks the
overdue series with one failing schedule of its own, beside the catalogue. The
dashboard's and the admin's edit forms are for runtime rows,
and W3/D6 check that a config row offers none. A cell that fails today because of one of issue
34's open defects carries ``pytest.mark.xfail(strict=True, reason="issue 34 defect N:
...")``, removed with the fix.

The tests (module::function)::

    B1  test_beat::test_each_type_fires_exactly_as_documented: the real engine and fire
        statement on an injected clock walk each schedule through its next documented
        fires, checking each passes just before and just after: the jobs (fire times,
        task, args, apply_async options), the run count, retirement; paused and retired
        fire nothing.
    B2  test_beat::test_a_celery_beat_fires_the_short_interval_on_its_grid_and_nothing_else:
        a real `celery beat -S awa_beat.Scheduler` with the config entries as its
        beat_schedule, on a database holding every row: the 7 s interval fires on its
        epoch grid, anything else that fires is due by its calendar, no row is changed.
    A1  test_api::test_get_shows_each_type_as_stored_with_its_next_fire
    A2  test_api::test_list_has_every_type (and a LIKE pattern)
    A3  test_api::test_update_changes_that_field_alone: task, args, kwargs, queue,
        priority, apply_async options, timezone, schedule; exactly that column changes,
        the pause or retirement stays; a config row refuses without force.
    A4  test_api::test_remove_deletes_each_type
    C1  test_cli::test_list_shows_every_type (text and --json)
    C2  test_cli::test_show_each_type (text and --json: next fires, last jobs)
    C3  test_cli::test_history_of_each_type, test_history_of_all_and_status_and_doctor
        (history without a name, status, doctor with one schedule late)
    C4  test_cli::test_export_has_every_type (python and json)
    C5  test_cli::test_add_each_type (--cron/--tz, --every, --solar, --at, an rrule
        marker, --start, --end, --max-runs, --one-off, then pause)
    C6  test_cli::test_edit_one_option_of_each_type (--queue; --force for config rows,
        refused in one line without), test_edit_the_calendar_of_each_type (bounds kept)
    W1  test_web::test_the_list_shows_every_type (Chromium; the page is saved as
        matrix-schedules-<layout>.png in $AWA_BEAT_SCREENSHOTS)
    W2  test_web::test_each_filter_and_search_shows_its_types (paused yes/no, owner,
        runtime, none, failing, searches), test_the_overdue_filter,
        test_filtering_through_the_form
    W3  test_web::test_the_page_of_each_type (the row, the next fires, no countdown
        while paused or retired, an edit link for runtime rows only)
    W4  test_web::test_add_each_type_through_the_form (standalone layout)
    W5  test_web::test_edit_each_runtime_type_through_the_form (standalone layout)
    D1  django_cases::test_the_changelist_shows_every_type (run per layout by
        test_django_admin::test_every_type_through_the_django_admin_in_both_layouts)
    D2  django_cases::test_each_filter_and_search (paused filter, searches)
    D3  django_cases::test_the_change_page_of_each_type (and Django's save refused)
    D4  django_cases::test_the_actions_on_each_type (trigger, pause, resume, audited)
    D5  django_cases::test_add_each_type_through_the_form
    D6  django_cases::test_edit_each_runtime_type_through_the_form (403 for config rows)
    M1  test_metrics::test_every_type_has_its_series (a real beat's /metrics)
    M2  test_metrics::test_a_failing_schedule_is_overdue_and_failed_in_the_metrics
        (awa_beat_overdue_schedules, awa_beat_schedule_last_outcome)
    P1  test_preview::test_the_api_previews_each_type (Schedules.preview: the catalogue's
        calendar, runs left, none once retired, paused listed as if resumed, the
        warnings), test_the_api_preview_over_a_dst_change_is_the_catalogues (cron-zone and
        crontab-dst-celery up to the next spring change: the gap marked and warned about),
        test_the_api_refuses_a_bad_preview
    P2  test_preview::test_the_cli_previews_each_type (text, --json, -n, --until),
        test_the_cli_previews_each_types_calendar_as_given (--cron/--tz, no database),
        test_the_cli_errors_name_the_field_with_their_exit_codes (1 and 2)
    P3  test_preview::test_the_dashboard_previews_each_type (Chromium: the schedule
        page's preview and its count form), test_the_dashboard_names_the_field_at_fault,
        test_the_dashboard_shows_what_an_operator_wrote_as_text (escaped)
    P4  django_cases::test_the_preview_on_the_change_page_of_each_type,
        test_the_preview_escapes_what_it_shows (run by test_django_admin)
    E1  test_export::test_python_export_is_celery_objects_or_comments
    E2  test_export::test_json_export_imported_back_gives_the_same_rows,
        test_python_export_imported_back_gives_the_same_rows
    E3  test_export::test_a_stock_celery_beat_runs_the_export,
        test_the_stock_beat_file_imported_back_gives_the_same_rows (standalone)

The regression tests of issue 34's defects live beside the cells, each in the file of
its topic (test_bounds, test_validation, test_validation_web, test_dispatch,
test_schema, test_typing, test_web_security, test_metrics, test_export).
"""
