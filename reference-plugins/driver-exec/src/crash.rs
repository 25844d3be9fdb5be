//! How a Go plugin dies of a panic, for the faults that crash the plugin in StartTask
//! (crashes-on-empty-args, panics-in-start).
//!
//! The Go runtime writes `panic: <value>` to stderr (for a runtime error, followed by a
//! `[signal ...]` line), an empty line, the stack of the panicking goroutine, and exits with
//! status 2. A host sees exactly that: lines that are not hclog JSON, then the process gone.

use std::io::Write as _;

/// What a nil pointer dereference in Go panics with.
pub const NIL_DEREFERENCE: &str =
    "runtime error: invalid memory address or nil pointer dereference";

/// The `[signal ...]` line that follows a runtime error caused by a fault.
const SEGV_LINE: &str = "[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x4a3f2b]";

/// The stack of the goroutine that was serving StartTask.
const START_TASK_STACK: &str = "goroutine 37 [running]:\n\
    main.(*Driver).StartTask(0xc000112000, {0x0, 0x0})\n\
    \t/src/driver/start.go:88 +0x2b\n\
    github.com/hashicorp/nomad/plugins/drivers.(*driverPluginServer).StartTask(0xc0001c4080, \
    {0x1f2e4c8, 0xc0003b6f00}, 0xc0002a8000)\n\
    \t/go/pkg/mod/github.com/hashicorp/nomad/plugins/drivers/server.go:104 +0x1c5\n\
    created by google.golang.org/grpc.(*Server).serveStreams.func2 in goroutine 36\n\
    \t/go/pkg/mod/google.golang.org/grpc/server.go:1029 +0x15d\n";

/// The exit status of a Go program that died of a panic.
const PANIC_EXIT_STATUS: i32 = 2;

/// Dies in StartTask the way a Go plugin does on `panic(value)`; a runtime error (such as
/// [`NIL_DEREFERENCE`]) also gets its `[signal SIGSEGV ...]` line.
pub fn panic_in_start_task(value: &str) -> ! {
    let mut text = format!("panic: {value}\n");
    if value.starts_with("runtime error: ") {
        text.push_str(SEGV_LINE);
        text.push('\n');
    }
    text.push('\n');
    text.push_str(START_TASK_STACK);
    // One write, so that no log line lands in the middle.
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(text.as_bytes());
    let _ = stderr.flush();
    std::process::exit(PANIC_EXIT_STATUS)
}
