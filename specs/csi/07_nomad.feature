@csi
Feature: nomad
  How Nomad itself drives a CSI plugin: the claim sequence when an allocation starts, the release
  sequence when it stops, with Nomad's staging and per-allocation path layout, two allocations
  sharing a volume on one node, Nomad's tolerance of NOT_FOUND on release, the per-node volume
  limit, concurrent creates, and repeated lifecycles.

  @CSI-NOMAD-CLAIM @must @requires-CREATE_DELETE_VOLUME
  Scenario: the claim sequence mounts the volume for the allocation
    Nomad calls ControllerPublishVolume (when the controller publishes) with the node ID from
    NodeGetInfo, then NodeStageVolume at <base>/staging/<namespace>/<volume>/<usage> (when the
    node stages), then NodePublishVolume at <base>/per-alloc/<alloc>/<volume>/<usage>, whose
    parent it creates; the task sees the volume there.

    Given the plugin has created a volume
    When Nomad claims the volume for an allocation
    Then every call of the claim succeeds
    And the allocation's target path shows the volume

  @CSI-NOMAD-RELEASE @must @requires-CREATE_DELETE_VOLUME
  Scenario: the release sequence undoes the claim
    Once the allocation stops, Nomad calls NodeUnpublishVolume, NodeUnstageVolume (when no other
    allocation on the node uses the volume) and ControllerUnpublishVolume; afterwards nothing of
    the claim is mounted and the volume can be deleted.

    Given the plugin has created a volume
    And Nomad has claimed the volume for an allocation
    When Nomad releases the volume for the allocation
    Then every call of the release succeeds
    And nothing stays mounted under the staging and allocation directories
    And the volume can be deleted

  @CSI-NOMAD-RELEASE-AGAIN @must @requires-CREATE_DELETE_VOLUME
  Scenario: releasing again succeeds or reports NOT_FOUND
    Nomad retries a release after any failure and treats NOT_FOUND from NodeUnpublishVolume,
    NodeUnstageVolume and ControllerUnpublishVolume as success; any other error keeps the
    volume claimed for up to 24 hours.

    Given the plugin has created a volume
    And Nomad has claimed the volume for an allocation
    And Nomad has released the volume for the allocation
    When Nomad releases the volume for the allocation again
    Then every call of the release succeeds or fails with NOT_FOUND

  @CSI-NOMAD-SHARED-VOLUME @must @requires-CREATE_DELETE_VOLUME @requires-multi-writer
  Scenario: two allocations on one node share a volume
    With a multi-writer access mode, two allocations on one node claim the same volume: it is
    staged once and published at both allocations' targets, which show the same data; after the
    first allocation stops the second still sees the volume, and only then is it unstaged.

    Given the plugin has created a multi-writer volume
    When Nomad claims the volume for two allocations on the node
    Then every call of the claims succeeds
    And the volume was staged once
    And a file written by the first allocation is seen by the second
    When Nomad releases the volume for the first allocation
    Then the second allocation still sees the volume
    When Nomad releases the volume for the second allocation
    Then nothing stays mounted under the staging and allocation directories

  @CSI-NOMAD-MAX-VOLUMES-PER-NODE @must @requires-PUBLISH_UNPUBLISH_VOLUME @requires-CREATE_DELETE_VOLUME @requires-max-volumes @serial
  Scenario: the node's volume limit is honoured
    Nomad's scheduler places at most max_volumes_per_node volumes on a node; the controller
    refuses one more with RESOURCE_EXHAUSTED.

    Given the plugin has created as many volumes as the node's limit, and one more
    When Nomad publishes every volume to the node
    Then every volume up to the limit is published
    And the one over the limit fails with RESOURCE_EXHAUSTED

  @CSI-NOMAD-CONCURRENT-CREATE @must @requires-CREATE_DELETE_VOLUME
  Scenario: concurrent creates with one name make one volume
    Nomad may send CreateVolume again while an earlier call for the same name is still running
    (a retried `nomad volume create`): every call that succeeds returns the same volume.

    When the harness creates one volume name with 5 concurrent calls
    Then every call that succeeds returns the same volume ID
    And at least one call succeeds

  @CSI-NOMAD-REPEATED-LIFECYCLE @must @requires-CREATE_DELETE_VOLUME
  Scenario: the whole lifecycle works again and again
    Create, claim, release and delete, repeated (the idempotency count setting), each step
    repeated as Nomad's retries would.

    When the harness runs the full volume lifecycle repeatedly
    Then every step of every round succeeds

  @CSI-NOMAD-RESTART @must @requires-launch @requires-CREATE_DELETE_VOLUME @serial
  Scenario: the plugin keeps its volumes and claims across a restart
    Nomad restarts a plugin task that crashes or fails its health checks and carries on with the
    volumes and claims it knew about: the restarted plugin must still know them.

    Given the plugin has created a volume
    And Nomad has claimed the volume for an allocation
    When the plugin restarts
    And Nomad releases the volume for the allocation
    Then every call of the release succeeds
    And the volume can be deleted
