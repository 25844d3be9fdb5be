@csi
Feature: nomad
  How Nomad itself drives a CSI plugin: the claim sequence when an allocation starts, the release
  sequence when it stops, with Nomad's staging and per-allocation path layout, two allocations
  sharing a volume on one node, a read claim beside a write claim, Nomad's tolerance of NOT_FOUND
  on release, the per-node volume limit, topology, deleting a volume in use, concurrent creates,
  and repeated lifecycles. A plugin whose controller cannot create volumes (no
  CREATE_DELETE_VOLUME) is claimed through the volumes given with --volume, as `nomad volume
  register` registers them.

  Background:
    Given Nomad has found the plugin ready

  @CSI-NOMAD-CLAIM @must @requires-node @requires-volume
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

  @CSI-NOMAD-KEEPS-DATA @must @requires-node @requires-volume
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

  @CSI-NOMAD-RELEASE @must @requires-node @requires-volume
  Scenario: the release sequence undoes the claim
    Once the allocation stops, Nomad calls NodeUnpublishVolume, NodeUnstageVolume (when no other
    allocation on the node uses the volume) and ControllerUnpublishVolume, which carries no
    secrets; afterwards nothing of the claim is mounted and the volume can be deleted.

    Basis: CSI spec v1.12, NodeUnpublishVolume and NodeUnstageVolume: each MUST undo the work of its
    counterpart; CSI spec v1.12, DeleteVolume: the plugin MUST implement it, and its error table
    refuses only a volume still in use; Nomad client/pluginmanager/csimanager/volume.go
    (unmountVolumeImpl, unpublishVolume): a failed NodeUnpublishVolume, or a target still mounted
    when Nomad removes it, stops the release before NodeUnstageVolume and
    client/allocrunner/csi_hook.go (unmountWithRetry) retries it for up to 24 hours, and
    nomad/csi_endpoint.go (controllerUnpublishVolume): a failed ControllerUnpublishVolume keeps the
    claim, so the volume can be neither claimed elsewhere nor deleted; client/structs/csi.go
    (ClientCSIControllerDetachVolumeRequest.ToCSIRequest) copies only the volume and node IDs into
    that request, so a plugin that needs secrets to detach can never release a claim.

    Given the plugin has created a volume
    And Nomad has claimed the volume for an allocation
    When Nomad releases the volume for the allocation
    Then every call of the release succeeds
    And nothing stays mounted under the staging and allocation directories
    And the volume can be deleted

  @CSI-NOMAD-RELEASE-AGAIN @must @requires-node @requires-volume
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

  @CSI-NOMAD-RESTART @must @requires-node @requires-launch @requires-volume @serial
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

  @CSI-NOMAD-READ-BESIDE-WRITE @must @requires-node @requires-CREATE_DELETE_VOLUME
  Scenario: a read claim beside a write claim on the node
    A multi-node-single-writer volume has one writer and any number of readers. A read claim on a
    node where a write claim already holds the volume is made as Nomad makes every read claim:
    ControllerPublishVolume again with readonly = true, NodeStageVolume at its own
    ro-file-system-multi-node-single-writer staging path, NodePublishVolume with readonly = true.
    Every call must succeed; the reader sees what the writer writes and cannot write itself; once
    the reader is released (its ro- path unstaged, the controller publication kept for the
    writer), the writer still writes.

    Basis: CSI spec v1.12, NodePublishVolume: with readonly = true the SP MUST publish the volume
    read-only; CSI spec v1.12, ControllerPublishVolume: only a publication incompatible with the
    request gets ALREADY_EXISTS, and a read-write attachment of a multi-node volume serves a
    read-only use; Nomad nomad/structs/csi.go (claimRead, HasFreeReadClaims) admits read claims
    beside the writer of a multi-node-single-writer volume, nomad/csi_endpoint.go (Claim) sends
    ControllerPublishVolume for every claim, client/pluginmanager/csimanager/volume.go
    (stageVolume, publishVolume) stages at the claim's own usage path, and a refused call fails
    the reader's allocation in client/allocrunner/csi_hook.go (Prerun): the reader cannot run on a
    node where the writer runs. Nomad also sends readonly = true to a plugin without
    PUBLISH_READONLY, which the spec lets refuse it: then the clause is skipped, saying so.

    Given the plugin has created a multi-node-single-writer volume
    And Nomad has claimed the volume for an allocation
    When Nomad claims the volume read-only for a second allocation on the node
    Then every call of the claim succeeds
    And the second allocation sees what the first writes, and cannot write
    When Nomad releases the volume for the read-only allocation
    Then the first allocation can still write to the volume

  @CSI-NOMAD-TOPOLOGY @must @requires-node @requires-CREATE_DELETE_VOLUME @reads-shared-volume
  Scenario: a created volume is reachable from the node by its topology
    If CreateVolume answers an accessible_topology, Nomad's scheduler places a claim of the
    volume only on a node whose NodeGetInfo accessible_topology has every segment of one of those
    topologies, with the same value. A plugin reporting topologies its nodes do not match makes
    volumes no allocation can ever use. Nomad sends accessibility_requirements present and empty
    unless the volume specification names topologies, so the plugin chooses. A volume with no
    topology can go anywhere, this node included.

    Basis: Nomad scheduler/feasible/feasible.go (CSIVolumeChecker.isFeasible) and
    nomad/structs/node.go (CSITopology.MatchFound, Contains): a volume with topologies is feasible
    only on a node whose plugin topology contains one of them, so a claim of it is never placed
    ("did not meet topology requirement"); client/structs/csi.go
    (ClientCSIControllerCreateVolumeRequest.ToCSIRequest) sends an empty, present
    accessibility_requirements; CSI spec v1.12, CreateVolume: accessible_topology says where the
    volume can be reached from.

    Given a volume, shared by the clauses that only read it
    Then the volume's topology, if it reports one, is reachable from the node's topology

  @CSI-NOMAD-DELETE-IN-USE @should @requires-node @requires-CREATE_DELETE_VOLUME @requires-PUBLISH_UNPUBLISH_VOLUME
  Scenario: DeleteVolume of a volume in use is refused
    `nomad volume delete` calls DeleteVolume before Nomad's own check that the volume is in use,
    so the plugin's refusal is all that keeps a running allocation's data: a claimed volume (the
    controller published it to the node) should get FAILED_PRECONDITION, and the allocation
    should still have its data.

    Basis: CSI spec v1.12, DeleteVolume Errors: FAILED_PRECONDITION is the code for a volume that
    cannot be deleted because it is in use, but nothing in the spec requires a plugin to refuse
    one, hence SHOULD; Nomad nomad/csi_endpoint.go (Delete, deleteVolume): DeleteVolume goes to
    the plugin first, and only then does the deregistration refuse a volume with claims, so a
    plugin that deletes it destroys the data of a running allocation while Nomad keeps the volume
    registered and claimed, and the release that follows finds no volume to unpublish. A
    controller with PUBLISH_UNPUBLISH_VOLUME knows the volume is published; one without it cannot
    know, and is not asked.

    Given the plugin has created a volume
    And Nomad has claimed the volume for an allocation
    And the allocation has written a file at its target path
    When `nomad volume delete` calls DeleteVolume of the claimed volume
    Then the call fails with FAILED_PRECONDITION
    And the allocation's target path still holds the file
