"""Stand-in of cached_path.common."""
from os import PathLike
from typing import Union

PathOrStr = Union[str, PathLike]
