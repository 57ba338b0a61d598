"""Local-only stand-in for the ``cached_path`` package: paths must be existing local files."""
import os


def cached_path(url_or_filename, cache_dir=None, extract_archive=False, force_extract=False):
    path = os.fspath(url_or_filename)
    if not os.path.exists(path):
        raise FileNotFoundError(f"offline stand-in of cached_path: {path} is not a local file")
    return path


def is_url_or_existing_file(url_or_filename):
    return os.path.exists(os.fspath(url_or_filename))


def resource_to_filename(resource, etag=None):
    raise NotImplementedError("offline stand-in of cached_path")


def check_tarfile(tar_file):
    return None


def find_latest_cached(url, cache_dir=None):
    return None


def filename_to_url(filename, cache_dir=None):
    raise NotImplementedError("offline stand-in of cached_path")
