//! Steps of the block devices feature: what an allocation sees through a block volume's target.

use std::fs::OpenOptions;
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::os::unix::fs::FileTypeExt as _;
use std::path::Path;

use cucumber::{given, then, when};

use super::nomad::{claim_alloc, claim_as};
use super::requests::Mode;
use super::{Alloc, CsiWorld, StepResult};
use crate::plugins::csi::Rpc;

/// How much the checks write through a device: one 4 KiB block at the start (the least
/// `--test-volume-size` the run accepts).
pub const BLOCK: usize = 4096;

#[given("the plugin has created a block volume")]
async fn block_volume(w: &mut CsiWorld) -> StepResult {
    w.must_create_volume(Mode::BlockSingleNodeWriter)
        .await
        .map(|_| ())
}

/// The bytes an allocation writes: the run token repeated, so that a stale or foreign device
/// cannot hold them by chance.
fn pattern(w: &CsiWorld) -> Vec<u8> {
    w.ctx().token.bytes().cycle().take(BLOCK).collect()
}

/// The allocation of claim `c`, or a failure naming the claim's calls.
fn claimed(w: &CsiWorld, c: usize) -> Result<Alloc, String> {
    claim_alloc(w, c).map(|(_, alloc)| alloc)
}

fn write_block(target: &Path, data: &[u8]) -> Result<(), String> {
    let mut f = OpenOptions::new()
        .write(true)
        .open(target)
        .map_err(|e| format!("opening {} for writing failed: {e}", target.display()))?;
    f.write_all(data).and_then(|()| f.sync_all()).map_err(|e| {
        format!(
            "writing {} bytes to {} failed: {e}",
            data.len(),
            target.display()
        )
    })
}

fn read_block(target: &Path) -> Result<Vec<u8>, String> {
    let mut f = std::fs::File::open(target)
        .map_err(|e| format!("opening {} failed: {e}", target.display()))?;
    let mut buf = vec![0; BLOCK];
    f.read_exact(&mut buf).map_err(|e| {
        format!(
            "reading {BLOCK} bytes from {} failed: {e}",
            target.display()
        )
    })?;
    Ok(buf)
}

#[then("the allocation's target path is a block device of the volume's size")]
async fn is_device(w: &mut CsiWorld) -> StepResult {
    let alloc = claimed(w, 0)?;
    let want = w.vol(0)?.capacity;
    let calls: Vec<Rpc> = w.last.clone();
    let refs: Vec<&Rpc> = calls.iter().collect();
    let expected = format!(
        "{} is a block device of at least {want} bytes (the volume's capacity)",
        alloc.target.display()
    );
    let meta = std::fs::metadata(&alloc.target)
        .map_err(|e| w.fail(&expected, &format!("it cannot be read: {e}"), &refs))?;
    if !meta.file_type().is_block_device() {
        let kind = if meta.is_dir() {
            "a directory"
        } else if meta.is_file() {
            "a regular file"
        } else {
            "not a block device"
        };
        return Err(w.fail(&expected, &format!("it is {kind}"), &refs));
    }
    let size = std::fs::File::open(&alloc.target)
        .and_then(|mut f| f.seek(SeekFrom::End(0)))
        .map_err(|e| w.fail(&expected, &format!("its size cannot be read: {e}"), &refs))?;
    if i64::try_from(size).unwrap_or(i64::MAX) >= want {
        return Ok(());
    }
    Err(w.fail(&expected, &format!("the device holds {size} bytes"), &refs))
}

#[then("data written through the allocation's device reads back")]
async fn reads_back(w: &mut CsiWorld) -> StepResult {
    let alloc = claimed(w, 0)?;
    let data = pattern(w);
    let calls: Vec<Rpc> = w.last.clone();
    let refs: Vec<&Rpc> = calls.iter().collect();
    let expected = "a block written through the allocation's device reads back the same";
    write_block(&alloc.target, &data).map_err(|e| w.fail(expected, &e, &refs))?;
    let got = read_block(&alloc.target).map_err(|e| w.fail(expected, &e, &refs))?;
    if got == data {
        return Ok(());
    }
    Err(w.fail(expected, "other bytes came back", &refs))
}

#[given("the allocation has written data through its device")]
async fn has_written(w: &mut CsiWorld) -> StepResult {
    let alloc = claimed(w, 0)?;
    let data = pattern(w);
    write_block(&alloc.target, &data).map_err(|e| {
        w.precondition(
            "CSI-BLOCK-CLAIM",
            "the allocation can write through its device",
            &e,
            &[],
        )
    })
}

#[when("Nomad claims the volume for a new allocation")]
async fn claims_again(w: &mut CsiWorld) -> StepResult {
    let calls = std::mem::take(&mut w.last);
    // The release before this claim is CSI-NOMAD-RELEASE's to judge (NOT_FOUND is done).
    if let Some(bad) = calls.iter().find(|c| !super::common::ok_or_not_found(c)) {
        return Err(w.precondition(
            "CSI-NOMAD-RELEASE",
            "the release of the first allocation succeeds",
            &bad.summary(),
            &[bad],
        ));
    }
    let mut calls = calls;
    calls.extend(claim_as(w, 0, false, false).await?);
    w.last = calls;
    Ok(())
}

#[then("the new allocation's device holds the data the first wrote")]
async fn data_kept(w: &mut CsiWorld) -> StepResult {
    let alloc = claimed(w, 1)?;
    let data = pattern(w);
    let calls: Vec<Rpc> = w.last.clone();
    let refs: Vec<&Rpc> = calls.iter().collect();
    let expected =
        "the block the first allocation wrote reads back through the new allocation's device";
    let got = read_block(&alloc.target).map_err(|e| w.fail(expected, &e, &refs))?;
    if got == data {
        return Ok(());
    }
    let zeros = got.iter().all(|b| *b == 0);
    Err(w.fail(
        expected,
        if zeros {
            "the block reads as zeros: the data is gone"
        } else {
            "other bytes came back"
        },
        &refs,
    ))
}

#[when("Nomad claims the volume read-only for an allocation")]
async fn claims_readonly(w: &mut CsiWorld) -> StepResult {
    w.last = claim_as(w, 0, false, true).await?;
    // Nomad sends readonly=true to ControllerPublishVolume for a read claim without looking at
    // PUBLISH_READONLY (nomad/csi_endpoint.go, controllerPublishVolume); the spec lets a plugin
    // without that capability refuse it. That is Nomad's conflict with the spec, not the plugin's
    // fault: the clause cannot be judged.
    let refused = w
        .last
        .iter()
        .find(|c| c.method == "ControllerPublishVolume" && c.code == tonic::Code::InvalidArgument);
    if refused.is_some() && !w.config().caps.controller.contains("PUBLISH_READONLY") {
        return Err(w.ctx().skip(
            "Nomad sends readonly=true to ControllerPublishVolume for a read claim whatever the plugin's capabilities, and this plugin, which does not advertise PUBLISH_READONLY, refuses it as the CSI spec allows: Nomad cannot claim its volumes read-only (a conflict between Nomad and the spec, not a plugin failure)",
        ));
    }
    Ok(())
}

#[then("writing through the allocation's device fails")]
async fn write_refused(w: &mut CsiWorld) -> StepResult {
    let alloc = claimed(w, 0)?;
    let data = pattern(w);
    let calls: Vec<Rpc> = w.last.clone();
    let refs: Vec<&Rpc> = calls.iter().collect();
    match write_block(&alloc.target, &data) {
        Err(_) => Ok(()),
        Ok(()) => Err(w.fail(
            "a device published with readonly = true refuses writes",
            &format!(
                "{BLOCK} bytes were written through {} and synced",
                alloc.target.display()
            ),
            &refs,
        )),
    }
}

#[then("no loop device the claim attached is still attached")]
async fn loops_detached(w: &mut CsiWorld) -> StepResult {
    // A device the plugin attached at CreateVolume may stay until DeleteVolume: it is checked
    // after the clause's cleanup (the LoopWatch), not here.
    let seen = w.claim_loops.clone();
    let left: Vec<String> =
        crate::loop_devices::still_attached_after(&seen, crate::loop_devices::DETACH_GRACE)
            .await
            .iter()
            .map(|a| a.to_string())
            .collect();
    if left.is_empty() {
        return Ok(());
    }
    let calls: Vec<Rpc> = w.last.clone();
    let refs: Vec<&Rpc> = calls.iter().collect();
    Err(w.fail(
        "after the release (NodeUnstageVolume done) the loop devices the claim's stage or publish attached are detached",
        &format!("still attached: {}", left.join(", ")),
        &refs,
    ))
}
