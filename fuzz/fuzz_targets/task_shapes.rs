#![no_main]
// The body is nomad_conform::fuzz_api::task_shapes: the harness's tests replay this target's corpus
// and regressions through it (fuzz_api::tests).
libfuzzer_sys::fuzz_target!(|data: &[u8]| nomad_conform::fuzz_api::task_shapes(data));
