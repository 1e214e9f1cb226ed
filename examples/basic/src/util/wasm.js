// lib/add.wasm is a binary module: require() returns its bytes, which become a WebAssembly instance once per global.
let instance = null;

module.exports.add = function (a, b) {
    if (instance === null) {
        instance = new WebAssembly.Instance(new WebAssembly.Module(require('lib/add.wasm')));
    }
    return instance.exports.add(a, b);
};
