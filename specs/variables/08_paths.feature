@variables
Feature: paths
  A variable path is 1 to 128 of the characters a-z, A-Z, 0-9, "-", "_", "~" and "/"; below
  "nomad/" only nomad/jobs/..., nomad/job-templates/<name> and nomad/sentinel/... may be
  written. Source: nomad/structs/variables.go and Nomad's Variables documentation.

  @VARIABLES-PATH-FORMAT @must
  Scenario: paths with other characters, or longer than 128 bytes, are refused with 400
    Basis: Nomad nomad/structs/variables.go (validVariablePath): a path must match
    ^[a-zA-Z0-9-_~/]{1,128}$; anything else is refused with 400 "invalid path" and not stored.

    When the harness writes "k=v" at each of these paths:
      | a.b |
      | a@b |
      | a b |
      | a+b |
    Then every answer is 400
    When the harness writes "k=v" at a path of 129 bytes
    Then the answer is 400
    When the harness writes "k=v" at a path of 128 bytes made of every allowed character
    Then the answer is 200

  @VARIABLES-PATH-RESERVED @must
  Scenario: below nomad/ only the paths Nomad reserves for jobs and job templates can be written
    Basis: Nomad nomad/structs/variables.go (ValidatePath): "nomad/jobs" and below, and
    "nomad/job-templates/<name>" one level down, are allowed; any other path under "nomad/",
    and anything deeper below "nomad/job-templates", is refused with 400.

    When the harness writes "nomad/JOB" with "k=v"
    Then the answer is 400
    When the harness writes "nomad/job-templates/JOB/extra" with "k=v"
    Then the answer is 400
    When the harness writes "nomad/jobs/JOB" with "k=v"
    Then the answer is 200
    When the harness writes "nomad/job-templates/JOB" with "k=v"
    Then the answer is 200
