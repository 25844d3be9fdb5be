@dhv
Feature: delete
  Nomad runs `<plugin> delete` when a volume is deleted, with the path that create returned in
  DHV_CREATED_PATH and the volume's other variables (no capacity). stdout is discarded.

  @DHV-DELETE-NEVER-CREATED @must
  Scenario: deleting a volume that does not exist succeeds
    A volume can be gone from the host already (a wiped disk, a failed create cleaned up by the
    plugin); delete must not turn that into an error. This needs no create: it is judged even
    when every create fails.

    When Nomad deletes a volume that was never created
    Then the plugin exits with status 0

  Rule: a volume the plugin created

    Background:
      Given the plugin has created a volume

    @DHV-DELETE-EXIT-ZERO @must
    Scenario: delete exits with status 0
      When Nomad deletes the volume
      Then the plugin exits with status 0

    @DHV-DELETE-REMOVES-PATH @must
    Scenario: delete removes the volume's path
      Delete must remove the path create returned (or derive it the same way create did).

      When Nomad deletes the volume
      Then the reported path no longer exists

    @DHV-DELETE-IDEMPOTENT @must
    Scenario: delete is idempotent
      Deleting an already deleted volume must not return an error.

      Given Nomad has deleted the volume
      When Nomad deletes the volume again
      Then the plugin exits with status 0

    @DHV-DELETE-DEADLINE @must
    Scenario: delete completes within the deadline
      Nomad kills delete after 60 seconds.

      When Nomad deletes the volume
      Then the call completes within the "delete" deadline

    @DHV-DELETE-SIBLINGS-UNTOUCHED @must
    Scenario: delete leaves other volumes alone
      Given the plugin has created a second volume
      And a file is written into the second volume
      When Nomad deletes the volume
      Then the second volume and its file are still there

    @DHV-DELETE-PARALLEL @must
    Scenario: deletes of different volumes can run at the same time
      Nomad runs operations on different volumes concurrently.

      Given the plugin has created 8 more volumes
      When Nomad deletes all the volumes at once
      Then every delete exits with status 0 and every path is gone

    @DHV-DELETE-AUTO-DELETE-KEEPS-OTHERS @must
    Scenario: the automatic delete after a failed state save does not wipe other volumes
      If the client fails to save a newly created volume in its state, it calls delete with
      DHV_CREATED_PATH set to the volumes directory itself and an empty DHV_VOLUME_NAME and
      DHV_NAMESPACE. A plugin that removes DHV_CREATED_PATH would wipe every volume on the node.
      That delete runs on what is left of the create's 60 s context (HostVolumeManager.Create in
      client/hostvolumemanager/host_volumes.go), and so does the harness's.

      Given the plugin has created a second volume
      And a file is written into the second volume
      When Nomad deletes the volume the way it does after failing to save client state
      Then the second volume and its file are still there

    @DHV-DELETE-AUTO-DELETE-REMOVES-VOLUME @should
    Scenario: the automatic delete after a failed state save removes the new volume
      The variables still identify the volume (DHV_VOLUME_ID, DHV_VOLUMES_DIR); a plugin that
      derives the path from them removes the stray volume.

      When Nomad deletes the volume the way it does after failing to save client state
      Then the reported path no longer exists

    @DHV-DELETE-ERROR-JSON @should
    Scenario: a failed delete explains itself in an error object
      On a failed delete Nomad reads {"error": "..."} from stdout as it does for create
      (HostVolumePluginExternal.Delete in client/hostvolumemanager/host_volume_plugin.go) and puts
      the message in the error `nomad volume delete` shows; without it the user sees only the exit
      status. If the ordinary delete fails, that call is judged; otherwise the harness asks for a
      delete with a DHV_VOLUME_ID that is no volume ID (`../nomad-conform-not-an-id`), and a
      plugin that accepts even that has given no failed delete to judge (skipped).

      When Nomad deletes the volume, and then a volume the plugin cannot delete
      Then stdout is a JSON object with a non-empty "error" string
