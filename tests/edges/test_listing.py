"""What both edges of the local code hand the core and say of a file they must not deploy
(``gitops/edges/listing.py``)."""

from __future__ import annotations

from gitops.edges.listing import BROKEN_LINK, ENDLESS_LINK, ROOT_IN_GIT, Listing, outside_note, root_prefix


def test_a_link_is_named_by_where_it_leads_and_whether_the_file_is_reached_through_it() -> None:
    assert outside_note("src/lib", through=True) == (
        "is reached through src/lib, a symbolic link that leads outside the root; copy the files into the root, "
        "or exclude them"
    )
    assert outside_note("src/x.js", through=False, leads="outside") == (
        "is a symbolic link that leads outside the repository; copy the file into the root, or exclude it"
    )
    assert outside_note("src/h", through=False, leads="git") == (
        "is a symbolic link that leads into .git, Git's own folder; copy the file into the root, or exclude it"
    )
    for words in (BROKEN_LINK, ENDLESS_LINK, ROOT_IN_GIT):
        assert words.startswith("is ")  # each reads after the path it is said of


def test_a_root_is_a_prefix_relative_to_the_manifests_folder() -> None:
    assert [root_prefix(root) for root in (".", "./", "src", "./src/", "dist/../src", "a/b/")] == [
        "",
        "",
        "src",
        "src",
        "src",
        "a/b",
    ]


def test_a_listing_reads_through_the_edges_reader() -> None:
    files = {"main.js": b"x"}
    listing = Listing(sorted(files), files.__getitem__)
    assert (listing.paths, listing.read("main.js"), listing.origin, listing.unlisted) == (["main.js"], b"x", "", {})
