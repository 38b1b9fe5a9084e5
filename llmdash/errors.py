"""The one exception type for mistakes a user can make (bad catalog, bad config, bad flag).

The CLI prints its message as a single line and exits with its code; nothing else
about it is shown, so the message must name the file and key that is wrong.
"""

EXIT_OK = 0
EXIT_DRIFT = 1      # stale generated/, refused publish, diff found changes
EXIT_USAGE = 2      # bad config, catalog, flag or argument
EXIT_REMOTE = 3     # Grafana or network error


class LlmdashError(Exception):
    def __init__(self, message: str, exit_code: int = EXIT_USAGE):
        super().__init__(message)
        self.exit_code = exit_code
