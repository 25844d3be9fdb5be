//! Golden msgpack bytes, written by hand from the encoding rules (task-drivers contract B.4,
//! go-cty `msgpack.Marshal`, go-msgpack's `MsgpackHandle`), not produced by this crate.

mod common;

use common::*;
use nomad_conform_hclspec::{SpecTree, decode_hcl, encode_cty, encode_plain, read_json};

/// Parses a hex string, ignoring whitespace and `|` separators.
fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| b.is_ascii_hexdigit()).collect();
    assert_eq!(digits.len() % 2, 0, "odd number of hex digits");
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}

fn encode(spec: &nomad_conform_proto::nomad::hclspec::Spec, hcl: &str) -> Vec<u8> {
    let tree = SpecTree::from_proto(spec).expect("spec converts");
    let value = decode_hcl(&tree, hcl).expect("config decodes");
    encode_cty(&value)
}

#[test]
fn driver_config_object_has_every_attribute_sorted_with_nil_for_unset() {
    let bytes = encode(
        &driver_like_spec(),
        "command = \"/bin/sh\"\nargs = [\"-c\", \"sleep 1\"]\nport_map { http = 80 }\n",
    );
    let expected = hex(concat!(
        "85",                      // fixmap, 5 entries: every spec attribute
        "a4 61726773",             // fixstr(4) "args"  (keys sorted bytewise)
        "92",                      //   fixarray, 2 elements
        "a2 2d63",                 //   fixstr(2) "-c"
        "a7 736c6565702031",       //   fixstr(7) "sleep 1"
        "a7 636f6d6d616e64",       // fixstr(7) "command"
        "a7 2f62696e2f7368",       //   fixstr(7) "/bin/sh"
        "a5 696d616765",           // fixstr(5) "image"
        "c0",                      //   nil: not set, no default
        "a8 706f72745f6d6170",     // fixstr(8) "port_map"
        "81",                      //   fixmap, 1 entry (block_attrs)
        "a4 68747470",             //   fixstr(4) "http"
        "50",                      //   positive fixint 80
        "aa 70726976696c65676564", // fixstr(10) "privileged"
        "c2",                      //   false, from Default's Literal "false"
    ));
    assert_eq!(bytes, expected);
}

#[test]
fn numbers_use_the_smallest_int_width_then_float64_then_decimal_text() {
    let names = [
        "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n",
    ];
    let spec = object(
        names
            .iter()
            .map(|n| (*n, attr(n, "number", true)))
            .collect(),
    );
    let hcl = "a = 127\nb = 128\nc = 255\nd = 256\ne = 65536\nf = 4294967296\ng = -32\n\
               h = -33\ni = -129\nj = 1.5\nk = 0.1\nl = -9223372036854775808\n\
               m = 9223372036854775808\nn = \"5\"\n";
    let expected = hex(concat!(
        "8e",                                             // fixmap, 14 entries
        "a161 7f",                 // "a": 127 fits positive fixint (0x00-0x7f)
        "a162 cc80",               // "b": 128 needs uint8 (0xcc)
        "a163 ccff",               // "c": 255 still uint8
        "a164 cd0100",             // "d": 256 needs uint16 (0xcd)
        "a165 ce00010000",         // "e": 65536 needs uint32 (0xce)
        "a166 cf0000000100000000", // "f": 2^32 needs uint64 (0xcf)
        "a167 e0",                 // "g": -32 is the smallest negative fixint (0xe0)
        "a168 d0df",               // "h": -33 needs int8 (0xd0), two's complement 0xdf
        "a169 d1ff7f",             // "i": -129 needs int16 (0xd1), 0xff7f
        "a16a cb3ff8000000000000", // "j": 1.5 is exact in binary: float64 (0xcb), never 0xca
        "a16b a3302e31",           // "k": 0.1 is not exact in binary: string "0.1"
        "a16c d38000000000000000", // "l": i64::MIN needs int64 (0xd3)
        "a16d b3 39323233333732303336383534373735383038", // "m": 2^63 is no int64: string(19)
        "a16e 05",                 // "n": "5" converted to number 5, fixint
    ));
    assert_eq!(encode(&spec, hcl), expected);
}

#[test]
fn strings_collections_and_key_order() {
    let spec = object(vec![
        ("s8", attr("s8", "string", false)),
        ("s16", attr("s16", "string", false)),
        ("m", attr("m", "map(string)", false)),
        ("set", attr("set", "set(string)", false)),
        ("t", attr("t", "bool", false)),
    ]);
    let s32 = "x".repeat(32);
    let s256 = "y".repeat(256);
    let hcl = format!(
        "s8 = \"{s32}\"\ns16 = \"{s256}\"\nm = {{ \"a\" = \"1\", \"B\" = \"2\", \"é\" = \"3\" }}\n\
         set = [\"b\", \"a\", \"b\"]\nt = true\n"
    );
    let expected = hex(&format!(
        concat!(
            "85",             // fixmap, 5 entries
            "a1 6d",          // "m"   ('m' 0x6d < 's' 0x73 < 't' 0x74)
            "83",             //   fixmap, 3 entries, keys sorted bytewise:
            "a1 42 a1 32",    //   "B" (0x42) = "2"
            "a1 61 a1 31",    //   "a" (0x61) = "1"
            "a2 c3a9 a1 33",  //   "é" (0xc3 0xa9) = "3"
            "a3 733136",      // "s16" ("s1" < "s8" < "se")
            "da 0100 {y256}", //   str16 (0xda), length 256
            "a2 7338",        // "s8"
            "d9 20 {x32}",    //   str8 (0xd9), length 32 (fixstr stops at 31)
            "a3 736574",      // "set"
            "92 a161 a162",   //   fixarray 2: duplicates dropped, sorted "a", "b"
            "a1 74",          // "t"
            "c3",             //   true
        ),
        y256 = "79".repeat(256),
        x32 = "78".repeat(32),
    ));
    assert_eq!(encode(&spec, &hcl), expected);
}

#[test]
fn nested_blocks_encode_as_arrays_of_maps_with_nil_for_unset() {
    let mount = object(vec![
        ("target", attr("target", "string", true)),
        ("readonly", attr("readonly", "bool", false)),
    ]);
    let spec = object(vec![("mount", block_list("mount", 0, 0, Some(mount)))]);
    let bytes = encode(
        &spec,
        "mount { target = \"/a\" }\nmount {\n target = \"/b\"\n readonly = true\n}\n",
    );
    let expected = hex(concat!(
        "81",                      // fixmap, 1 entry
        "a5 6d6f756e74",           // "mount"
        "92",                      //   fixarray, 2 blocks in source order
        "82",                      //   fixmap, 2 entries
        "a8 726561646f6e6c79 c0",  //     "readonly": nil (unset)
        "a6 746172676574 a2 2f61", //     "target": "/a"
        "82",                      //   fixmap, 2 entries
        "a8 726561646f6e6c79 c3",  //     "readonly": true
        "a6 746172676574 a2 2f62", //     "target": "/b"
    ));
    assert_eq!(bytes, expected);
}

#[test]
fn empty_config_gives_every_attribute_with_defaults() {
    let spec = object(vec![
        (
            "enabled",
            default(Some(attr("enabled", "bool", false)), Some(literal("true"))),
        ),
        (
            "signal",
            default(
                Some(attr("signal", "string", false)),
                Some(literal("\"SIGTERM\"")),
            ),
        ),
        (
            "volumes",
            default(
                Some(attr("volumes", "list(string)", false)),
                Some(literal("[]")),
            ),
        ),
        ("extra", attr("extra", "map(string)", false)),
    ]);
    let tree = SpecTree::from_proto(&spec).unwrap();
    let value = nomad_conform_hclspec::decode_json(&tree, &serde_json::json!({})).unwrap();
    let expected = hex(concat!(
        "84",                   // fixmap, 4 entries
        "a7 656e61626c6564 c3", // "enabled": true (Literal)
        "a5 6578747261 c0",     // "extra": nil
        "a6 7369676e616c",      // "signal"
        "a7 5349475445524d",    //   "SIGTERM" (Literal)
        "a7 766f6c756d6573 90", // "volumes": empty fixarray (Literal "[]")
    ));
    assert_eq!(encode_cty(&value), expected);
}

#[test]
fn plain_form_is_go_msgpack_of_the_given_fields_only() {
    let fields = serde_json::json!({
        "command": "/bin/sleep",
        "args": ["1"],
        "port": 8080,
        "big": 200,
        "neg": -200,
        "f": 1.5,
        "long": "x".repeat(32),
    });
    let expected = hex(&format!(
        concat!(
            "87",                        // fixmap, 7 entries: only the given fields, in order
            "a7 636f6d6d616e64",         // "command"
            "aa 2f62696e2f736c656570",   //   fixstr(10) "/bin/sleep"
            "a4 61726773 91 a131",       // "args": fixarray 1, "1"
            "a4 706f7274 d1 1f90",       // "port": Go int 8080 is int16 (0xd1), not uint16
            "a3 626967 d1 00c8",         // "big": 200 is int16 too (no uint8 for Go int)
            "a3 6e6567 d1 ff38",         // "neg": -200 is int16, two's complement 0xff38
            "a1 66 cb3ff8000000000000",  // "f": float64
            "a4 6c6f6e67 da 0020 {x32}", // "long": 32 bytes use str16 (0xda): no str8
        ),
        x32 = "78".repeat(32),
    ));
    assert_eq!(encode_plain(&fields), expected);
    // Both forms read back to the same JSON.
    assert_eq!(read_json(&expected).unwrap(), fields);
}

#[test]
fn reading_refuses_what_is_not_a_config() {
    assert!(read_json(&hex("81 a161")).is_err(), "truncated map");
    assert!(read_json(&hex("c0 c0")).is_err(), "trailing bytes");
    assert!(read_json(&hex("81 01 02")).is_err(), "integer key");
    assert!(
        read_json(&hex("d4 00 00")).is_err(),
        "ext type 0 (cty unknown)"
    );
    assert_eq!(
        read_json(&hex("c4 02 6869")).unwrap(),
        serde_json::json!("hi"),
        "bin as string"
    );
}
