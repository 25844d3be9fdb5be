//! Shell scripts that repeat a recorded call: start the plugin with Nomad's environment, read
//! its handshake line, and call the method with grpcurl against the announced address (unix
//! socket or TCP), using our .proto files (import path: [`crate::plugins::proto_dir`]).
//! Requests are protobuf JSON, so bytes fields (msgpack payloads) are base64 strings.

use super::launch_spec::LaunchSpec;
use super::protocol::Service;

/// The script of [`super::DriverRpc::reproduce`], for any request JSON (several messages,
/// for a client stream, separated by newlines: grpcurl reads them in turn).
pub fn reproduce_script(
    launch: &LaunchSpec,
    service: Service,
    method: &str,
    request_json: &str,
) -> String {
    use crate::shell::quote;
    format!(
        "out=$(mktemp); {start} >\"$out\" & pid=$!\n\
         until [ -s \"$out\" ]; do sleep 0.1; done\n\
         line=$(head -n1 \"$out\"); net=$(echo \"$line\" | cut -d'|' -f3); addr=$(echo \"$line\" | cut -d'|' -f4)\n\
         if [ \"$net\" = unix ]; then u=-unix; else u=; fi\n\
         grpcurl -plaintext -authority unused $u -import-path {dir} -proto {proto} -d {req} \"$addr\" {svc}/{method}\n\
         kill -9 $pid",
        start = launch.command_line(),
        dir = quote(crate::plugins::proto_dir()),
        proto = service.proto_file(),
        req = quote(request_json),
        svc = service.full_name(),
    )
}
