# conform-fleet: certify the plugins installed on every Nomad client node with nomad-conform.
#
#   nomad job run -var 'nomad_conform=/usr/bin/nomad-conform' deploy/nomad/conform-fleet.nomad.hcl
#   nomad-conform fleet collect --job conform-fleet --html fleet.html --junit fleet.xml
#
# A sysbatch job places one allocation on every eligible client node and runs it once to the
# end; a node whose allocation completed is not run again for the same job version. To certify
# again, change the job, e.g. `nomad job run -var "run=$(date +%s)" ...`; `fleet collect` keeps
# the newest allocation of each node.
#
# Each allocation runs `nomad-conform dhv --plugin-dir` against the node's host_volume_plugin_dir
# (every plugin Nomad's client would find there, one run each) and, for CSI, a poststop task:
#
# - csi_plugin_id set (a plugin Nomad runs): `nomad-conform fleet csi-node` asks the CSI plugin
#   API (GET /v1/plugin/csi/<id>, through the Task API socket with the task's workload identity)
#   which allocation runs the plugin's node instance on this node, and runs
#   `nomad-conform csi --plugin-type node` against the socket Nomad's client gives that
#   allocation, <client state_dir>/csi/plugins/<alloc ID>/csi.sock. A node where the plugin has
#   no healthy allocation has nothing to test: the task says so and exits 3. The workload
#   identity needs read-plugin: `nomad acl policy apply -namespace default -job conform-fleet
#   -group conform -task csi conform-fleet-csi csi-read.hcl` with plugin { policy = "read" }.
# - csi_socket set (a plugin run outside Nomad, at the same path on every node):
#   `nomad-conform csi --endpoint unix://<csi_socket>`.
#
# The JSON run records stay in the allocation directory, under ${NOMAD_ALLOC_DIR}/conform/
# (dhv/<plugin>.json, with .xml and .html beside them, and csi.json), where `fleet collect`
# reads them through Nomad's client filesystem API; `nomad alloc fs <alloc> alloc/conform`
# shows them too.
#
# The raw_exec driver is needed: nomad-conform must see the node as the Nomad client does (the
# real plugin directory, the tools the plugins call, mounts, a CSI plugin's socket) and run the
# plugins as the client runs them, as root. raw_exec is off by default; enable it on the
# clients first:
#
#   plugin "raw_exec" {
#     config {
#       enabled = true
#     }
#   }

variable "node_pool" {
  description = "The node pool to certify; \"all\" is every node of every pool."
  type        = string
  default     = "all"
}

variable "constraint_attribute" {
  description = "The node attribute the job is constrained on (e.g. $${meta.plugins})."
  type        = string
  default     = "$${attr.kernel.name}"
}

variable "constraint_value" {
  description = "The value constraint_attribute must have: by default, every linux node."
  type        = string
  default     = "linux"
}

variable "nomad_conform" {
  description = "Path of the nomad-conform binary on the nodes (the Debian package installs it here)."
  type        = string
  default     = "/usr/bin/nomad-conform"
}

variable "plugin_dir" {
  # The client's host_volume_plugin_dir; Nomad's default is <data_dir>/host_volume_plugins
  # (command/agent/agent.go), and /opt/nomad/data is the data_dir of Nomad's Linux packages
  # (.release/linux/package/etc/nomad.d/nomad.hcl).
  description = "The clients' host_volume_plugin_dir."
  type        = string
  default     = "/opt/nomad/data/host_volume_plugins"
}

variable "dhv_args" {
  description = "More flags for nomad-conform dhv, e.g. [\"--parameters\", \"{\\\"mode\\\": \\\"0755\\\"}\"]."
  type        = list(string)
  default     = []
}

variable "csi_plugin_id" {
  # A plugin Nomad runs (its job's csi_plugin { id }): each plugin allocation has its own socket
  # directory, <client state_dir>/csi/plugins/<alloc ID>/ (client/allocrunner/taskrunner/
  # plugin_supervisor_hook.go), so the node's allocation is looked up in the CSI plugin API.
  description = "The ID of a CSI plugin Nomad runs, tested as a node plugin on every node; empty: none."
  type        = string
  default     = ""
}

variable "client_state_dir" {
  # Nomad's client state_dir is <data_dir>/client unless client { state_dir } says otherwise
  # (command/agent/agent.go); /opt/nomad/data is the Linux packages' data_dir.
  description = "The clients' state_dir, where Nomad keeps CSI plugin sockets (csi/plugins/<alloc ID>/csi.sock)."
  type        = string
  default     = "/opt/nomad/data/client"
}

variable "csi_volumes" {
  description = "Existing volumes a node plugin run claims, as nomad-conform csi --volume takes them (ID[,CONTEXT-JSON])."
  type        = list(string)
  default     = []
}

variable "csi_args" {
  description = "More flags for nomad-conform csi, e.g. [\"--mount-dir\", \"/srv/csi-test\"]."
  type        = list(string)
  default     = []
}

variable "csi_socket" {
  # A path that is the same on every node: a plugin run outside Nomad. For a plugin Nomad runs,
  # give csi_plugin_id instead.
  description = "The unix socket of a CSI plugin run outside Nomad, the same on every node; empty: none."
  type        = string
  default     = ""
}

variable "csi_plugin_type" {
  description = "With csi_socket: what the CSI plugin is, as its csi_plugin block says: monolith, node or controller."
  type        = string
  default     = "monolith"
}

variable "run" {
  description = "Any new value makes a new job version, which runs on every node again."
  type        = string
  default     = "1"
}

job "conform-fleet" {
  type      = "sysbatch"
  node_pool = var.node_pool

  meta {
    run = var.run
  }

  constraint {
    attribute = var.constraint_attribute
    value     = var.constraint_value
  }

  group "conform" {
    # nomad-conform exits 1 when a plugin is not conformant, which fails the task: running it
    # again would find the same. The records are kept either way.
    restart {
      attempts = 0
      mode     = "fail"
    }

    task "dhv" {
      driver = "raw_exec"

      config {
        command = var.nomad_conform
        args = concat([
          "dhv",
          "--plugin-dir", var.plugin_dir,
          "--out-dir", "${NOMAD_ALLOC_DIR}/conform/dhv",
        ], var.dhv_args)
      }

      resources {
        cpu    = 200
        memory = 256
      }
    }

    # Only with csi_plugin_id set. A poststop task runs once the dhv task has ended, whatever
    # its exit status (a failed task would stop its running siblings).
    dynamic "task" {
      for_each = var.csi_plugin_id == "" ? [] : [var.csi_plugin_id]
      iterator = plugin
      labels   = ["csi"]

      content {
        driver = "raw_exec"

        lifecycle {
          hook = "poststop"
        }

        # The task's workload identity as NOMAD_TOKEN, for the Task API socket.
        identity {
          env = true
        }

        env {
          NOMAD_ADDR = "unix://${NOMAD_SECRETS_DIR}/api.sock"
        }

        config {
          command = var.nomad_conform
          args = concat([
            "fleet", "csi-node",
            "--plugin-id", plugin.value,
            "--node-id", "${node.unique.id}",
            "--state-dir", var.client_state_dir,
            "--json", "${NOMAD_ALLOC_DIR}/conform/csi.json",
            "--",
          ], flatten([for v in var.csi_volumes : ["--volume", v]]), var.csi_args)
        }

        resources {
          cpu    = 200
          memory = 256
        }
      }
    }

    # Only with csi_socket set (and csi_plugin_id not), as the csi_plugin_id task above.
    dynamic "task" {
      for_each = var.csi_socket == "" || var.csi_plugin_id != "" ? [] : [var.csi_socket]
      iterator = socket
      labels   = ["csi"]

      content {
        driver = "raw_exec"

        lifecycle {
          hook = "poststop"
        }

        config {
          command = var.nomad_conform
          args = concat([
            "csi",
            "--endpoint", "unix://${socket.value}",
            "--plugin-type", var.csi_plugin_type,
            "--json", "${NOMAD_ALLOC_DIR}/conform/csi.json",
          ], var.csi_args)
        }

        resources {
          cpu    = 200
          memory = 256
        }
      }
    }
  }
}
