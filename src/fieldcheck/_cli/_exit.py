"""Exit statuses shared by every command: 0 everything scored, 2 usage error, 3 some input failed
(the rest was scored and every output written; the failures are listed in the output folder)."""

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_FAILED = 3
