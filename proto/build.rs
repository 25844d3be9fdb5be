//! Compiles our .proto files into Rust with protox (pure Rust, no system `protoc`) and
//! tonic-prost-build, all into one `FileDescriptorSet`; prost writes one module file per package.
//!
//! Besides the code, it derives two things from the .proto files themselves, so they stay the
//! only place that says which fields need special treatment:
//! - `secret_fields.rs` in OUT_DIR: the fully-qualified names of every field of the CSI file
//!   whose trailing comment is `secret` (included by `src/lib.rs` as `SECRET_FIELDS`); only
//!   `csi/v1/csi.proto` is scanned for these;
//! - serde attributes: all generated types derive `serde::Serialize`; secret fields serialise
//!   with their values redacted, and, in every file, `google.protobuf.Timestamp` fields as
//!   RFC 3339 strings and `google.protobuf.Duration` fields as protobuf-JSON strings such as
//!   `"1.500s"` (prost-types has no serde support of its own). Any other well-known type that
//!   prost maps to a prost-types struct fails the build here, instead of as an obscure serde
//!   error in the generated code.

use std::env;
use std::fs;
use std::path::PathBuf;

use prost_types::field_descriptor_proto::{Label, Type as FieldType};
use prost_types::{DescriptorProto, FileDescriptorSet};

const PROTO_ROOT: &str = "proto";
const CSI_FILE: &str = "csi/v1/csi.proto";

/// Every file we compile, relative to `PROTO_ROOT`. Imports among them resolve against the
/// same root; `google/protobuf/*` comes bundled with protox.
const PROTO_FILES: &[&str] = &[
    CSI_FILE,
    // Nomad plugin protocols (packages hashicorp.nomad.plugins.*).
    "plugins/base/proto/base.proto",
    "plugins/drivers/proto/driver.proto",
    "plugins/shared/hclspec/hcl_spec.proto",
    "plugins/shared/structs/proto/attribute.proto",
    "plugins/shared/structs/proto/recoverable_error.proto",
    "plugins/shared/structs/proto/stats.proto",
    // go-plugin's own services (package plugin).
    "internal/plugin/grpc_broker.proto",
    "internal/plugin/grpc_controller.proto",
    "internal/plugin/grpc_stdio.proto",
    // Standard gRPC health checking (package grpc.health.v1).
    "grpc/health/v1/health.proto",
];

/// Well-known types that prost maps to Rust primitives (`Option<f64>`, `Option<String>`, `()`,
/// ...), which serde handles without help.
const PLAIN_WELL_KNOWN_TYPES: &[&str] = &[
    ".google.protobuf.BoolValue",
    ".google.protobuf.BytesValue",
    ".google.protobuf.DoubleValue",
    ".google.protobuf.FloatValue",
    ".google.protobuf.Int32Value",
    ".google.protobuf.Int64Value",
    ".google.protobuf.StringValue",
    ".google.protobuf.UInt32Value",
    ".google.protobuf.UInt64Value",
    ".google.protobuf.Empty",
];

const TIMESTAMP: &str = ".google.protobuf.Timestamp";
const DURATION: &str = ".google.protobuf.Duration";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed={PROTO_ROOT}");

    let fds = protox::compile(PROTO_FILES, [PROTO_ROOT])?;
    let fields = scan_fields(&fds)?;

    let out_dir = PathBuf::from(env::var("OUT_DIR")?);
    fs::write(
        out_dir.join("secret_fields.rs"),
        render_secret_list(&fields.secrets),
    )?;

    let mut builder = tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .type_attribute(".", "#[derive(serde::Serialize)]");
    let serializers = [
        (&fields.secrets, "redacted"),
        (&fields.timestamps, "timestamp"),
        (&fields.durations, "duration"),
    ];
    for (names, serializer) in serializers {
        for field in names {
            builder = builder.field_attribute(
                format!(".{field}"),
                format!("#[serde(serialize_with = \"crate::serde_support::{serializer}\")]"),
            );
        }
    }
    builder.compile_fds(fds)?;
    Ok(())
}

/// Fields that need special treatment, as `package.Message.field`.
#[derive(Default)]
struct SpecialFields {
    /// Only from the CSI file.
    secrets: Vec<String>,
    timestamps: Vec<String>,
    durations: Vec<String>,
}

fn scan_fields(fds: &FileDescriptorSet) -> Result<SpecialFields, String> {
    let mut found = SpecialFields::default();
    // The well-known types' own files are in the set too, but prost does not generate them.
    for file in fds.file.iter().filter(|f| f.package() != "google.protobuf") {
        // Trailing comments live in source_code_info, addressed by a path of field numbers and
        // indexes: 4 = FileDescriptorProto.message_type, 3 = DescriptorProto.nested_type,
        // 2 = DescriptorProto.field. Only the CSI file marks secrets this way.
        let comments: Vec<(&[i32], &str)> = if file.name() == CSI_FILE {
            file.source_code_info
                .iter()
                .flat_map(|info| &info.location)
                .map(|loc| (loc.path.as_slice(), loc.trailing_comments()))
                .collect()
        } else {
            Vec::new()
        };
        for (index, message) in file.message_type.iter().enumerate() {
            let prefix = format!("{}.{}", file.package(), message.name());
            scan_message(
                message,
                &prefix,
                vec![4, index as i32],
                &comments,
                &mut found,
            )?;
        }
    }
    Ok(found)
}

fn scan_message(
    message: &DescriptorProto,
    qualified_name: &str,
    path: Vec<i32>,
    comments: &[(&[i32], &str)],
    found: &mut SpecialFields,
) -> Result<(), String> {
    let is_map_entry = message
        .options
        .as_ref()
        .is_some_and(|options| options.map_entry());
    for (index, field) in message.field.iter().enumerate() {
        let mut field_path = path.clone();
        field_path.extend([2, index as i32]);
        let field_name = format!("{qualified_name}.{}", field.name());
        let is_secret = comments
            .iter()
            .any(|(p, comment)| *p == field_path.as_slice() && comment.trim() == "secret");
        if is_secret {
            found.secrets.push(field_name.clone());
        }

        let type_name = field.type_name();
        if field.r#type() != FieldType::Message
            || !type_name.starts_with(".google.protobuf.")
            || PLAIN_WELL_KNOWN_TYPES.contains(&type_name)
        {
            continue;
        }
        // The serializers in serde_support take `&Option<T>`: a singular field.
        if field.label() == Label::Repeated || is_map_entry {
            return Err(format!(
                "{field_name}: repeated or map fields of {type_name} have no serde serializer; \
                 add one to serde_support and teach build.rs about it"
            ));
        }
        match type_name {
            TIMESTAMP => found.timestamps.push(field_name),
            DURATION => found.durations.push(field_name),
            other => {
                return Err(format!(
                    "{field_name}: {other} has no serde serializer; add one to serde_support \
                     and teach build.rs about it"
                ));
            }
        }
    }
    for (index, nested) in message.nested_type.iter().enumerate() {
        let mut nested_path = path.clone();
        nested_path.extend([3, index as i32]);
        let nested_name = format!("{qualified_name}.{}", nested.name());
        scan_message(nested, &nested_name, nested_path, comments, found)?;
    }
    Ok(())
}

fn render_secret_list(secrets: &[String]) -> String {
    let mut out = String::from(
        "/// Fully-qualified names (`package.Message.field`) of every field that carries secrets.\n\
         /// Generated by build.rs from the `// secret` comments in csi.proto.\n\
         pub const SECRET_FIELDS: &[&str] = &[\n",
    );
    for name in secrets {
        out.push_str(&format!("    {name:?},\n"));
    }
    out.push_str("];\n");
    out
}
