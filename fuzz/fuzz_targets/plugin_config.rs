#![no_main]
// The body is nomad_conform::fuzz_api::plugin_config: the harness's tests replay this target's corpus
// and regressions through it (fuzz_api::tests).
//
// The HCL library panics on some arithmetic (an integer overflow; a division by zero, through a
// debug assertion that a number is finite). The harness catches those panics where it decodes a
// plugin configuration (steps::driver::config) and gives the user an error instead; libFuzzer's
// panic hook would abort on the caught panic all the same. This target's hook is quiet and does
// not abort: a panic the harness catches is its answer, and one that escapes the body still ends
// the run (it cannot unwind out of libFuzzer's callback), as a crash with its input kept.
libfuzzer_sys::fuzz_target!(
    init: std::panic::set_hook(Box::new(|_| {})),
    |data: &[u8]| nomad_conform::fuzz_api::plugin_config(data)
);
