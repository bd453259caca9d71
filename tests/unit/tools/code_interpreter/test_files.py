"""A container's /mnt/data as the gateway reads and writes it: links and special files the code makes are
never followed, never block, and what the gateway writes replaces them."""

from __future__ import annotations

import os

import pytest

from responses_gateway.tools.code_interpreter import files


def test_only_regular_files_are_seen_and_read(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("host secret")
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "a.txt").write_text("a")
    (data / "sub" / "b.txt").write_text("bb")
    os.symlink(outside, data / "link.txt")
    os.symlink(tmp_path, data / "dirlink")
    os.mkfifo(data / "pipe")
    seen = files.scan(str(data))
    assert sorted(seen) == ["/mnt/data/a.txt", "/mnt/data/sub/b.txt"]
    assert files.read(str(data), "/mnt/data/sub/b.txt", 10) == b"bb"
    assert files.read(str(data), "/mnt/data/link.txt", 100) is None
    assert files.read(str(data), "/mnt/data/dirlink/outside.txt", 100) is None
    assert files.read(str(data), "/mnt/data/pipe", 100) is None  # and it did not block
    assert files.read(str(data), "/mnt/data/a.txt", 0) is None  # larger than allowed


def test_a_write_replaces_a_link_instead_of_writing_through_it(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("host original")
    data = tmp_path / "data"
    data.mkdir()
    os.symlink(outside, data / "upload.txt")
    files.write(str(data), "/mnt/data/upload.txt", b"new", None)
    assert outside.read_text() == "host original"
    assert not os.path.islink(data / "upload.txt") and (data / "upload.txt").read_bytes() == b"new"
    os.symlink(tmp_path, data / "dir")
    with pytest.raises(OSError):
        files.write(str(data), "/mnt/data/dir/x.txt", b"x", None)  # no directory link is followed either
    assert not (tmp_path / "x.txt").exists()
    files.remove(str(data), "/mnt/data/upload.txt")
    files.remove(str(data), "/mnt/data/never.txt")
    assert not (data / "upload.txt").exists()


@pytest.mark.parametrize("path", ["/etc/passwd", "/mnt/data/../x", "/mnt/data/", "/mnt/data//x", "mnt/data/x"])
def test_paths_outside_mnt_data_are_refused(path):
    with pytest.raises(ValueError):
        files.relative(path)


def test_uploaded_names_are_one_component():
    assert files.safe_name("../../etc/passwd") == "passwd"
    assert files.safe_name("C:\\\\Users\\\\me\\\\data.csv") == "data.csv"
    assert files.safe_name("..") == "file" and files.safe_name("") == "file"
