// The deploy script this bot used before screeps-gitops; kept for reference, excluded in gitops.yaml.
module.exports = function (grunt) {
    grunt.loadNpmTasks('grunt-screeps');
    grunt.initConfig({
        screeps: {
            options: { token: process.env.SCREEPS_TOKEN, branch: 'default' },
            dist: { src: ['*.js', '!Gruntfile.js'] },
        },
    });
};
