"""Stand-in of cached_path.file_lock."""
from filelock import FileLock  # noqa: F401
