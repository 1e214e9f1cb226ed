"""``gitops/core/taskrunners.py``: what a gulp or grunt file does to the code, read from its text (pure)."""

from __future__ import annotations

import pytest

from gitops.core.taskrunners import (
    Pipeline,
    block_after,
    glob_folder,
    grunt_pipeline,
    gulp_pipeline,
    relative_folder,
    script_running_task,
)


@pytest.mark.parametrize(
    ("path", "folder"),
    [
        ("./dist", "dist"),
        ("dist/", "dist"),
        ("a/../b", "b"),
        ("/abs", None),
        ("../up", None),
        ("${out}", None),
        ("C:dist", None),
        ("~/x", None),
        ("a\\b", None),
        ("", None),
    ],
)
def test_an_output_folder_is_a_root_inside_the_repository_or_none(path: str, folder: str | None) -> None:
    assert relative_folder(path) == folder


def test_the_folder_a_glob_reads() -> None:
    assert glob_folder("dist/*.js") == "dist"
    assert glob_folder("*.js") == "."
    assert glob_folder("dist/main.js") == "dist"
    assert glob_folder("a/b/**/x.js") == "a/b"


def test_the_block_after_a_key_is_its_object_to_the_matching_brace() -> None:
    text = "grunt.initConfig({ screeps: { options: { branch: 'x' }, dist: { src: ['dist/*.js'] } }, copy: {} })"
    assert block_after(text, "screeps") == " options: { branch: 'x' }, dist: { src: ['dist/*.js'] } "
    assert block_after(text, "missing") is None


GULP_BUILD = """
const gulp = require('gulp');
const screeps = require('gulp-screeps');
gulp.task('compile', () => gulp.src('src/*.ts').pipe(ts()).pipe(gulp.dest('dist')));
gulp.task('deploy', () => gulp.src('dist/*.js').pipe(screeps(credentials)));
"""


def test_a_gulpfile_that_writes_a_folder_is_built_by_its_build_named_task() -> None:
    assert gulp_pipeline("gulpfile.js", GULP_BUILD) == Pipeline(
        "gulp", "gulpfile.js", "dist", "compile", False, upload_glob="*.js"
    )


def test_a_gulpfile_that_only_uploads_the_sources_is_no_build() -> None:
    text = "gulp.task('default', () => gulp.src('src/*.js').pipe(screeps(credentials)));"
    assert gulp_pipeline("gulpfile.js", text) is None


GRUNT_UPLOAD = """
module.exports = function (grunt) {
  grunt.loadNpmTasks('grunt-screeps');
  grunt.loadNpmTasks('grunt-contrib-copy');
  grunt.initConfig({
    screeps: { options: { branch: 'default' }, dist: { src: ['dist/*.js'] } },
    copy: { main: { files: [{ expand: true, cwd: 'src/', src: ['**'], dest: 'dist/' }] } },
  });
  grunt.registerTask('default', ['copy', 'screeps']);
};
"""


def test_a_gruntfile_builds_with_the_steps_of_its_upload_task_before_the_upload() -> None:
    found = grunt_pipeline("Gruntfile.js", GRUNT_UPLOAD, frozenset({"src"}))
    assert found == Pipeline(
        "grunt", "Gruntfile.js", "dist", "copy", False, from_upload_task="default", upload_glob="*.js"
    )


def test_a_gruntfile_uploading_the_sources_as_they_are_is_no_build() -> None:
    text = "grunt.loadNpmTasks('grunt-screeps'); grunt.initConfig({ screeps: { dist: { src: ['src/*.js'] } } });"
    assert grunt_pipeline("Gruntfile.js", text, frozenset({"src"})) is None


def test_the_package_script_that_runs_the_task_best_named_first() -> None:
    scripts = {"ci": "gulp compile", "build": "npm ci && npx gulp compile", "deploy": "gulp compile", "x": "gulp"}
    assert script_running_task(scripts, "gulp", "compile") == "build"
    assert script_running_task(scripts, "gulp", None) == "x"
    assert script_running_task({"test": "grunt test"}, "grunt", "build") is None
    assert script_running_task({"build": "gulp 'unclosed"}, "gulp", None) is None
