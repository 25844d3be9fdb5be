@csi
Feature: nomad
  How Nomad itself drives a CSI plugin: the claim sequence when an allocation starts, the release
  sequence when it stops, with Nomad's staging and per-allocation path layout, two allocations
  sharing a volume on one node, Nomad's tolerance of NOT_FOUND on release, the per-node volume
  limit, concurrent creates, and repeated lifecycles.

  @CSI-NOMAD-CLAIM @must @requires-node @requires-CREATE_DELETE_VOLUME
  Scenario: the claim sequence gives the allocation the volume
    Nomad calls ControllerPublishVolume (when the controller publishes) with the node ID from
    NodeGetInfo, then NodeStageVolume at <base>/staging/<namespace>/<volume>/<usage> (when the node
    stages), then NodePublishVolume at <base>/per-alloc/<alloc>/<volume>/<usage>, whose parent it
    creates. Every call must succeed, and the allocation's target path must be a writable directory.

    Basis: CSI spec v1.12, ControllerPublishVolume, NodeStageVolume and NodePublishVolume: a plugin
    with the matching capability MUST implement each, and for a mount access type the SP SHALL place
    the mounted directory at target_path and MUST ensure the CO can use it as described; Nomad
    client/allocrunner/csi_hook.go (Prerun): a refused claim, stage or publish fails the allocation
    before its tasks start, and client/allocrunner/taskrunner/volume_hook.go (prepareCSIVolumes)
    bind-mounts the target path into the tasks.

    Given the plugin has created a volume
    When Nomad claims the volume for an allocation
    Then every call of the claim succeeds
    And the allocation's target path is a writable directory

  @CSI-NOMAD-KEEPS-DATA @must @requires-node @requires-CREATE_DELETE_VOLUME
  Scenario: a volume keeps its data from one claim to the next
    What an allocation writes at its target path is there for the next allocation that claims the
    volume, after the first one's release (unpublish, unstage, controller unpublish). Nothing is
    required of the staging path: a plugin may publish straight from its backing store.

    Basis: CSI spec v1.12, Volume: the volume_id SHALL keep referring to the same volume in later
    calls, and NodeUnpublishVolume and NodeUnstageVolume undo the publish and the stage, not the
    volume; Nomad client/allocrunner/csi_hook.go (Prerun, Postrun): every allocation reaches a
    claimed volume through a new claim at its own target path, and a volume is where a job keeps
    data from one allocation to the next: a target that does not reach the volume loses what the
    task wrote, with no error anywhere.

    Given the plugin has created a volume
    And Nomad has claimed the volume for an allocation
    And the allocation has written a file at its target path
    When Nomad releases the volume for the allocation
    And Nomad claims the volume for a new allocation
    Then every call of the claim succeeds
    And the new allocation's target path holds the file the first wrote

  @CSI-NOMAD-RELEASE @must @requires-node @requires-CREATE_DELETE_VOLUME
  Scenario: the release sequence undoes the claim
    Once the allocation stops, Nomad calls NodeUnpublishVolume, NodeUnstageVolume (when no other
    allocation on the node uses the volume) and ControllerUnpublishVolume; afterwards nothing of
    the claim is mounted and the volume can be deleted.

    Basis: CSI spec v1.12, NodeUnpublishVolume and NodeUnstageVolume: each MUST undo the work of its
    counterpart; CSI spec v1.12, DeleteVolume: the plugin MUST implement it, and its error table
    refuses only a volume still in use; Nomad client/pluginmanager/csimanager/volume.go
    (unmountVolumeImpl, unpublishVolume): a failed NodeUnpublishVolume, or a target still mounted
    when Nomad removes it, stops the release before NodeUnstageVolume and
    client/allocrunner/csi_hook.go (unmountWithRetry) retries it for up to 24 hours, and
    nomad/csi_endpoint.go (controllerUnpublishVolume): a failed ControllerUnpublishVolume keeps the
    claim, so the volume can be neither claimed elsewhere nor deleted.

    Given the plugin has created a volume
    And Nomad has claimed the volume for an allocation
    When Nomad releases the volume for the allocation
    Then every call of the release succeeds
    And nothing stays mounted under the staging and allocation directories
    And the volume can be deleted

  @CSI-NOMAD-RELEASE-AGAIN @must @requires-node @requires-CREATE_DELETE_VOLUME
  Scenario: releasing again succeeds or reports NOT_FOUND
    Nomad retries a release after any failure and treats NOT_FOUND from NodeUnpublishVolume,
    NodeUnstageVolume and ControllerUnpublishVolume as success; any other error keeps the
    volume claimed for up to 24 hours.

    Basis: CSI spec v1.12, NodeUnpublishVolume, NodeUnstageVolume and ControllerUnpublishVolume:
    each MUST be idempotent, and a volume no longer staged or attached MUST get OK; Nomad
    plugins/csi/client.go (NodeUnpublishVolume, NodeUnstageVolume, ControllerUnpublishVolume):
    NOT_FOUND is ignored as already done, while any other error fails the release, which
    client/allocrunner/csi_hook.go (unmountWithRetry) retries for up to 24 hours, and leaves the
    claim in place.

    Given the plugin has created a volume
    And Nomad has claimed the volume for an allocation
    And Nomad has released the volume for the allocation
    When Nomad releases the volume for the allocation again
    Then every call of the release succeeds or fails with NOT_FOUND

  @CSI-NOMAD-SHARED-VOLUME @must @requires-node @requires-CREATE_DELETE_VOLUME @requires-multi-writer
  Scenario: two allocations on one node share a volume
    With a multi-writer access mode, two allocations on one node claim the same volume exactly as
    Nomad does: NodeStageVolume is skipped only when the staging directory is already a mount point,
    otherwise the volume is staged again (nothing requires a single stage), and each allocation gets
    its own NodePublishVolume. Every call must succeed, both targets see each other's writes, and
    after the first allocation stops the second still sees the volume; only then is it unstaged.

    Basis: CSI spec v1.12, NodePublishVolume: for a MULTI_NODE volume the second-publish table says
    a publish at another target path SHOULD get OK, and NodeStageVolume: a repeated identical stage
    MUST get OK; Nomad nomad/structs/csi.go (HasFreeWriteClaims) lets any number of allocations
    write-claim a multi-node-multi-writer volume, client/pluginmanager/csimanager/volume.go
    (stageVolume, publishVolume) stages again unless the staging directory is a mount point and
    publishes at each allocation's own target, a refused call fails that allocation in
    client/allocrunner/csi_hook.go (Prerun), and usage_tracker.go (Free) holds NodeUnstageVolume
    back until the last claim on the node is released.

    Given the plugin has created a multi-writer volume
    When Nomad claims the volume for two allocations on the node
    Then every call of the claims succeeds
    And a file written by the first allocation is seen by the second
    When Nomad releases the volume for the first allocation
    Then the second allocation still sees the volume
    When Nomad releases the volume for the second allocation
    Then nothing stays mounted under the staging and allocation directories

  @CSI-NOMAD-MAX-VOLUMES-PER-NODE @must @requires-controller @requires-PUBLISH_UNPUBLISH_VOLUME @requires-CREATE_DELETE_VOLUME @requires-max-volumes @attaches-all
  Scenario: the controller publishes as many volumes as the node's limit
    Nomad's scheduler places at most max_volumes_per_node of the plugin's volumes on a node, so the
    controller must publish that many; if it refuses one more because the node's limit is reached,
    the code must be RESOURCE_EXHAUSTED.

    Basis: CSI spec v1.12, NodeGetInfo: max_volumes_per_node is how many volumes the controller can
    publish to the node; CSI spec v1.12, ControllerPublishVolume Errors: a publish refused because
    the node's maximum of attached volumes is reached MUST get RESOURCE_EXHAUSTED; Nomad
    scheduler/feasible/feasible.go (CSIVolumeChecker.isFeasible) enforces the limit itself and
    places up to that many volumes on the node, and a refused ControllerPublishVolume fails its
    allocation in client/allocrunner/csi_hook.go (Prerun).

    Given the plugin has created as many volumes as the node's limit, and one more
    When Nomad publishes every volume to the node
    Then every volume up to the limit is published
    And the one over the limit is published or fails with RESOURCE_EXHAUSTED

  @CSI-NOMAD-CONCURRENT-CREATE @should @requires-controller @requires-CREATE_DELETE_VOLUME
  Scenario: concurrent creates with one name make one volume
    Two overlapping `nomad volume create` runs for one volume (the first still waiting on the
    plugin) send CreateVolume with one name at the same time; Nomad itself neither retries
    CreateVolume nor serialises creates. Every call that succeeds should return the same volume; the
    others may get ABORTED.

    Basis: CSI spec v1.12, CreateVolume: the plugin SHOULD ensure that several CreateVolume calls
    with one name provision no more than one volume; CSI spec v1.12, Concurrency: it SHOULD handle
    simultaneous calls for a volume gracefully and MAY refuse the extra ones with ABORTED; Nomad
    nomad/csi_endpoint.go (Create, createVolume) calls CreateVolume once per request without
    serialising creates, and a duplicate only leaks storage that Nomad never sees.

    When the harness creates one volume name with 5 concurrent calls
    Then every call that succeeds returns the same volume ID
    And at least one call succeeds

  @CSI-NOMAD-REPEATED-LIFECYCLE @must @requires-controller @requires-node @requires-CREATE_DELETE_VOLUME
  Scenario: the whole lifecycle works again and again
    Create, claim, release and delete, repeated (the idempotency count setting), each step
    repeated as Nomad's retries would.

    Basis: CSI spec v1.12, CreateVolume, ControllerPublishVolume, NodeStageVolume,
    NodePublishVolume, NodeUnpublishVolume, NodeUnstageVolume, ControllerUnpublishVolume and
    DeleteVolume: each MUST be idempotent, so a repeated call with the same arguments gets OK; Nomad
    client/allocrunner/csi_hook.go (Prerun, unmountWithRetry) and nomad/csi_endpoint.go (Claim,
    Unpublish) repeat claims and releases, and a refused call fails the allocation or keeps the
    volume claimed.

    When the harness runs the full volume lifecycle repeatedly
    Then every step of every round succeeds

  @CSI-NOMAD-RESTART @must @requires-node @requires-launch @requires-CREATE_DELETE_VOLUME @serial
  Scenario: the plugin keeps its volumes and claims across a restart
    Nomad restarts a plugin task that crashes or fails its start-up probes and carries on with the
    volumes and claims it knew about: the restarted plugin must still know them.

    Basis: CSI spec v1.12, NodeUnpublishVolume and NodeUnstageVolume: each MUST undo the work of its
    counterpart, with no exemption for a restarted plugin, and CSI spec v1.12, Volume: the volume_id
    SHALL keep referring to the volume in later calls; Nomad
    client/allocrunner/taskrunner/plugin_supervisor_hook.go (ensureSupervisorLoop): a plugin task
    whose start-up probes fail is restarted, as a crashed one is by its restart policy, while Nomad
    keeps its claims and later releases them with the same IDs and paths: a plugin that forgot a
    mount answers NOT_FOUND, which Nomad ignores, but client/pluginmanager/csimanager/volume.go
    (unpublishVolume) cannot remove the still-mounted target and the release is retried for up to 24
    hours.

    Given the plugin has created a volume
    And Nomad has claimed the volume for an allocation
    When the plugin restarts
    And Nomad releases the volume for the allocation
    Then every call of the release succeeds
    And the volume can be deleted
