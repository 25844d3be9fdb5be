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
# (every plugin Nomad's client would find there, one run each) and, when csi_socket is set, a
# poststop task runs `nomad-conform csi --endpoint unix://<csi_socket>`. The JSON run records
# stay in the allocation directory, under ${NOMAD_ALLOC_DIR}/conform/ (dhv/<plugin>.json, with
# .xml and .html beside them, and csi.json), where `fleet collect` reads them through Nomad's
# client filesystem API; `nomad alloc fs <alloc> alloc/conform` shows them too.
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

variable "csi_socket" {
  # A path that is the same on every node, e.g. a plugin run outside Nomad. A plugin that Nomad
  # runs has its socket at <data_dir>/client/csi/plugins/<plugin alloc ID>/csi.sock
  # (client/allocrunner/taskrunner/plugin_supervisor_hook.go), which differs from node to node.
  description = "The CSI plugin's unix socket on the nodes; empty: no CSI run."
  type        = string
  default     = ""
}

variable "csi_plugin_type" {
  description = "What the CSI plugin is, as its job's csi_plugin block says: monolith, node or controller."
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

    # Only with csi_socket set. A poststop task runs once the dhv task has ended, whatever its
    # exit status (a failed task would stop its running siblings).
    dynamic "task" {
      for_each = var.csi_socket == "" ? [] : [var.csi_socket]
      iterator = socket
      labels   = ["csi"]

      content {
        driver = "raw_exec"

        lifecycle {
          hook = "poststop"
        }

        config {
          command = var.nomad_conform
          args = [
            "csi",
            "--endpoint", "unix://${socket.value}",
            "--plugin-type", var.csi_plugin_type,
            "--json", "${NOMAD_ALLOC_DIR}/conform/csi.json",
          ]
        }

        resources {
          cpu    = 200
          memory = 256
        }
      }
    }
  }
}
