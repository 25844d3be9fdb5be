@csi @requires-node @requires-block @requires-CREATE_DELETE_VOLUME
Feature: block devices
  Nomad's `attachment_mode = "block-device"` sends a block access type: the allocation's target
  is a device node the plugin creates, not a directory. A plugin that refuses block volumes at
  CreateVolume (INVALID_ARGUMENT) skips these clauses; one that accepts them must make them work.

  Background:
    Given Nomad has found the plugin ready

  @CSI-BLOCK-CLAIM @must
  Scenario: the claim of a block volume gives the allocation a block device
    Nomad claims the volume as for a file-system volume, with the usage
    rw-block-device-single-node-writer in its paths; the target must be a block device as large
    as the volume, and what is written through it must read back.

    Basis: CSI spec v1.12, NodePublishVolume: for a block access type the SP SHALL place the block
    device at target_path and MUST ensure the CO can use it as described; CSI spec v1.12,
    CreateVolume: the volume MUST be at least required_bytes; Nomad
    client/allocrunner/taskrunner/volume_hook.go (prepareCSIVolumes) hands the target to the tasks
    as their device, and a refused call fails the allocation in client/allocrunner/csi_hook.go
    (Prerun).

    Given the plugin has created a block volume
    When Nomad claims the volume for an allocation
    Then every call of the claim succeeds
    And the allocation's target path is a block device of the volume's size
    And data written through the allocation's device reads back

  @CSI-BLOCK-KEEPS-DATA @must
  Scenario: a block volume keeps its data from one claim to the next
    After the allocation stops (unpublish, unstage, controller unpublish) a new allocation that
    claims the volume sees what the first wrote.

    Basis: CSI spec v1.12, Volume: the volume_id SHALL be what the CO uses in later calls to refer
    to this volume, and NodeUnpublishVolume and NodeUnstageVolume MUST undo only the node-side work
    of their counterparts, so a new claim presents the same storage; Nomad nomad/csi_endpoint.go
    (Claim) claims the same volume ID for the new allocation.

    Given the plugin has created a block volume
    And Nomad has claimed the volume for an allocation
    And the allocation has written data through its device
    When Nomad releases the volume for the allocation
    And Nomad claims the volume for a new allocation
    Then every call of the claim succeeds
    And the new allocation's device holds the data the first wrote

  @CSI-BLOCK-READONLY @must
  Scenario: a read-only claim of a block volume cannot write
    A read claim publishes with readonly = true (usage ro-block-device-...): the device the
    allocation gets must refuse writes. A read-only bind mount alone does not stop writes to a
    device node.

    Basis: CSI spec v1.12, NodePublishVolume: readonly is REQUIRED and, when true, the SP MUST
    publish the volume read-only; Nomad client/allocrunner/taskrunner/volume_hook.go
    (prepareCSIVolumes) bind-mounts the device read-only, which does not stop writes to a device
    node, so the plugin is the only guard.

    Given the plugin has created a block volume
    When Nomad claims the volume read-only for an allocation
    Then every call of the claim succeeds
    And writing through the allocation's device fails

  @CSI-BLOCK-RELEASE @must
  Scenario: the release of a block volume leaves nothing behind
    Once the allocation is gone and the volume unstaged, nothing stays bound under Nomad's
    directories, and a loop device the claim itself attached (in NodeStageVolume or
    NodePublishVolume) is detached: an attached loop device keeps its image's space and its number
    until reboot, and nothing in Nomad notices. A loop device the plugin attached at CreateVolume
    may stay until DeleteVolume.

    Basis: CSI spec v1.12, NodeUnpublishVolume and NodeUnstageVolume: each MUST undo the work of its
    counterpart, a loop device that stage or publish attached included, while a device attached at
    CreateVolume is DeleteVolume's to remove; Nomad client/pluginmanager/csimanager/volume.go
    (unpublishVolume): a target still bound cannot be removed and client/allocrunner/csi_hook.go
    (unmountWithRetry) retries the release for up to 24 hours, while nothing in Nomad notices a
    leaked loop device.

    Given the plugin has created a block volume
    And Nomad has claimed the volume for an allocation
    When Nomad releases the volume for the allocation
    Then every call of the release succeeds
    And nothing stays mounted under the staging and allocation directories
    And no loop device the claim attached is still attached
    And the volume can be deleted
