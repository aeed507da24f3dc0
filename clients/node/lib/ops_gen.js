// Generated from protocol/ops/ops.json by protocol/ops/generate.py (protocol/ops/emit_node.py);
// DO NOT EDIT: change ops.json and run protocol/ops/generate.py --write.
'use strict';

/** Every op's name, in ops.json's order. */
const OPS = [
  "ping",
  "enqueue",
  "state",
  "claim",
  "renew",
  "complete",
  "release",
  "claim_next",
  "fail",
  "check",
  "retry",
  "stats",
  "list",
  "purge",
  "metrics",
  "complete_next",
  "enqueue_many",
  "complete_many",
  "renew_many",
  "cancel",
  "job",
  "queue_config",
  "await",
  "schedule_set",
  "schedule_delete",
  "schedule_list",
  "enqueue_and_wait",
  "results",
  "snooze",
  "retry_many",
  "cancel_many",
  "step_save",
  "suspend",
  "signal",
  "group_config"
];

/** The ops that carry `now` under --clock client (ops.json: time optional or required). */
const NOW_OPS = [
  "enqueue",
  "claim",
  "renew",
  "complete",
  "claim_next",
  "fail",
  "check",
  "stats",
  "list",
  "purge",
  "metrics",
  "complete_next",
  "enqueue_many",
  "complete_many",
  "renew_many",
  "cancel",
  "job",
  "await",
  "schedule_set",
  "schedule_list",
  "enqueue_and_wait",
  "results",
  "snooze",
  "retry_many",
  "cancel_many",
  "step_save",
  "suspend",
  "signal"
];

/**
 * Each op's optional fields, JS name -> wire name, in ops.json's order (its
 * includes first), `now` last when the op carries it.
 */
const OPTION_FIELDS = {
  "ping": {
    "describe": "describe"
  },
  "enqueue": {
    "queue": "queue",
    "payload": "payload",
    "priority": "priority",
    "delay": "delay",
    "maxAttempts": "max_attempts",
    "key": "key",
    "uniqueFor": "unique_for",
    "onConflict": "on_conflict",
    "group": "group",
    "after": "after",
    "afterFailure": "after_failure",
    "maxRuntime": "max_runtime",
    "headers": "headers",
    "deadline": "deadline",
    "now": "now"
  },
  "state": {},
  "claim": {
    "now": "now"
  },
  "renew": {
    "progress": "progress",
    "now": "now"
  },
  "complete": {
    "now": "now"
  },
  "release": {},
  "claim_next": {
    "wait": "wait",
    "max": "max",
    "now": "now"
  },
  "fail": {
    "retryIn": "retry_in",
    "now": "now"
  },
  "check": {
    "now": "now"
  },
  "retry": {},
  "stats": {
    "now": "now"
  },
  "list": {
    "queue": "queue",
    "state": "state",
    "limit": "limit",
    "after": "after",
    "prefix": "prefix",
    "key": "key",
    "group": "group",
    "order": "order",
    "afterCreated": "after_created",
    "now": "now"
  },
  "purge": {
    "state": "state",
    "prefix": "prefix",
    "group": "group",
    "limit": "limit",
    "queue": "queue",
    "olderThan": "older_than",
    "now": "now"
  },
  "metrics": {
    "now": "now"
  },
  "complete_next": {
    "now": "now"
  },
  "enqueue_many": {
    "now": "now"
  },
  "complete_many": {
    "next": "next",
    "now": "now"
  },
  "renew_many": {
    "now": "now"
  },
  "cancel": {
    "now": "now"
  },
  "job": {
    "now": "now"
  },
  "queue_config": {
    "paused": "paused",
    "maxLeased": "max_leased",
    "rate": "rate",
    "per": "per",
    "groupMaxLeased": "group_max_leased",
    "groupRate": "group_rate",
    "groupPer": "group_per",
    "keepDone": "keep_done",
    "keepDead": "keep_dead",
    "keepCancelled": "keep_cancelled"
  },
  "await": {
    "wait": "wait",
    "now": "now"
  },
  "schedule_set": {
    "tz": "tz",
    "queue": "queue",
    "payload": "payload",
    "priority": "priority",
    "maxAttempts": "max_attempts",
    "now": "now"
  },
  "schedule_delete": {},
  "schedule_list": {
    "now": "now"
  },
  "enqueue_and_wait": {
    "queue": "queue",
    "payload": "payload",
    "priority": "priority",
    "delay": "delay",
    "maxAttempts": "max_attempts",
    "key": "key",
    "uniqueFor": "unique_for",
    "onConflict": "on_conflict",
    "group": "group",
    "after": "after",
    "afterFailure": "after_failure",
    "maxRuntime": "max_runtime",
    "headers": "headers",
    "deadline": "deadline",
    "wait": "wait",
    "now": "now"
  },
  "results": {
    "statesOnly": "states_only",
    "now": "now"
  },
  "snooze": {
    "now": "now"
  },
  "retry_many": {
    "state": "state",
    "prefix": "prefix",
    "group": "group",
    "limit": "limit",
    "now": "now"
  },
  "cancel_many": {
    "state": "state",
    "prefix": "prefix",
    "group": "group",
    "limit": "limit",
    "now": "now"
  },
  "step_save": {
    "now": "now"
  },
  "suspend": {
    "onTimeout": "on_timeout",
    "now": "now"
  },
  "signal": {
    "value": "value",
    "now": "now"
  },
  "group_config": {
    "maxLeased": "max_leased",
    "rate": "rate",
    "per": "per"
  }
};

/** Each batch op's fields that hold entries: field -> entry kind (ENTRY_FIELDS). */
const BATCH_FIELDS = {
  "enqueue_many": {
    "jobs": "job"
  },
  "complete_many": {
    "items": "complete_item",
    "next": "next"
  },
  "renew_many": {
    "items": "renew_item"
  }
};

/** Each entry kind's fields, JS name -> wire name, in ops.json's order. */
const ENTRY_FIELDS = {
  "job": {
    "id": "id",
    "queue": "queue",
    "payload": "payload",
    "priority": "priority",
    "delay": "delay",
    "maxAttempts": "max_attempts",
    "key": "key",
    "uniqueFor": "unique_for",
    "onConflict": "on_conflict",
    "group": "group",
    "after": "after",
    "afterFailure": "after_failure",
    "maxRuntime": "max_runtime",
    "headers": "headers",
    "deadline": "deadline"
  },
  "complete_item": {
    "id": "id",
    "owner": "owner",
    "fence": "fence",
    "result": "result"
  },
  "renew_item": {
    "id": "id",
    "owner": "owner",
    "fence": "fence",
    "progress": "progress"
  },
  "next": {
    "queue": "queue",
    "ttl": "ttl",
    "max": "max"
  }
};

/** Each op's answer: its entry of ANSWERS. */
const ANSWER_OF = {
  "ping": "info",
  "enqueue": "enqueued",
  "state": "lease_state",
  "claim": "fence",
  "renew": "flag",
  "complete": "flag",
  "release": "flag",
  "claim_next": "claimed",
  "fail": "flag",
  "check": "flag",
  "retry": "flag",
  "stats": "stats",
  "list": "jobs",
  "purge": "count",
  "metrics": "text",
  "complete_next": "completed_next",
  "enqueue_many": "enqueued_list",
  "complete_many": "flags_next",
  "renew_many": "flags",
  "cancel": "flag",
  "job": "detail",
  "queue_config": "flag",
  "await": "detail",
  "schedule_set": "flag",
  "schedule_delete": "flag",
  "schedule_list": "schedules",
  "enqueue_and_wait": "detail",
  "results": "results",
  "snooze": "flag",
  "retry_many": "bulk",
  "cancel_many": "bulk",
  "step_save": "flag",
  "suspend": "token",
  "signal": "flag",
  "group_config": "flag"
};

/**
 * What each answer is on the wire (ops.json's "answers" section, whose
 * "about" says how to read a shape); SHAPES, the shapes they name.
 */
const ANSWERS = {
  "info": {
    "type": "map",
    "record": {
      "keys": {
        "protocol": {
          "type": "int"
        },
        "version": {
          "type": "str"
        },
        "clock": {
          "type": "str"
        }
      },
      "optional": {
        "ops": {
          "type": "map",
          "values": "ids"
        }
      }
    }
  },
  "enqueued": {
    "when": {
      "given": [
        "key"
      ]
    },
    "then": {
      "type": "map",
      "keys": {
        "id": {
          "type": "str"
        },
        "created": {
          "type": "bool"
        }
      }
    },
    "else": {
      "type": "bool"
    }
  },
  "lease_state": {
    "type": "nil|map",
    "record": {
      "keys": {
        "id": {
          "type": "str"
        },
        "owner": {
          "type": "str|nil"
        },
        "until": {
          "type": "number"
        },
        "fence": {
          "type": "int"
        },
        "result": {
          "type": "str|nil"
        },
        "done": {
          "type": "bool"
        }
      },
      "optional": {
        "progress": {
          "type": "str"
        }
      }
    }
  },
  "fence": {
    "type": "int|nil"
  },
  "flag": {
    "type": "bool"
  },
  "claimed": {
    "when": {
      "given": [
        "max"
      ]
    },
    "then": {
      "type": "array",
      "items": "claimed_job",
      "max_length": "max"
    },
    "else": {
      "one_of": [
        {
          "type": "nil"
        },
        "claimed_job"
      ]
    }
  },
  "count": {
    "when": {
      "given": [
        "state",
        "prefix",
        "group",
        "limit"
      ]
    },
    "then": "bulk",
    "else": {
      "type": "int",
      "min": 0
    }
  },
  "text": {
    "type": "str"
  },
  "token": {
    "type": "str|bool"
  },
  "completed_next": {
    "type": "map",
    "keys": {
      "completed": {
        "type": "bool"
      },
      "next": {
        "one_of": [
          {
            "type": "nil"
          },
          "claimed_job"
        ]
      }
    }
  },
  "enqueued_list": {
    "type": "array",
    "items": "enqueued",
    "entries": "jobs"
  },
  "flags_next": {
    "when": {
      "given": [
        "next"
      ]
    },
    "then": {
      "type": "map",
      "keys": {
        "completed": "flags",
        "next": {
          "type": "array",
          "items": "claimed_job",
          "max_length": "next.max"
        }
      }
    },
    "else": "flags"
  },
  "flags": {
    "type": "array",
    "items": {
      "type": "bool"
    },
    "entries": "items"
  },
  "detail": {
    "type": "nil|map",
    "include": [
      "job_row"
    ],
    "optional": {
      "after": "ids",
      "blocked_children": "ids",
      "headers": "headers",
      "steps": "steps",
      "signal": {
        "type": "bin|str|nil"
      },
      "suspended": {
        "type": "map",
        "keys": {
          "timeout": {
            "type": "number"
          },
          "on_timeout": {
            "type": "str"
          }
        }
      }
    },
    "record": {
      "keys": {
        "result": {
          "type": "str|nil"
        },
        "payload": {
          "type": "bin|str|nil"
        }
      }
    }
  },
  "jobs": {
    "type": "array",
    "items": "job_row"
  },
  "schedules": {
    "type": "array",
    "items": "schedule"
  },
  "results": {
    "type": "map",
    "values": {
      "type": "nil|map",
      "keys": {
        "state": {
          "type": "str"
        },
        "result": {
          "type": "str|nil"
        }
      },
      "record": {
        "optional": {
          "omitted": {
            "type": "bool"
          }
        }
      }
    }
  },
  "bulk": {
    "type": "map",
    "keys": {
      "count": {
        "type": "int",
        "min": 0
      },
      "more": {
        "type": "bool"
      }
    }
  },
  "stats": {
    "type": "map",
    "keys": {
      "queues": {
        "type": "map",
        "record": {
          "values": "queue_stats"
        }
      }
    },
    "record": {
      "keys": {
        "requests": {
          "type": "int"
        },
        "commits": {
          "type": "int"
        },
        "batches": {
          "type": "int"
        },
        "failed_commits": {
          "type": "int"
        },
        "mean_batch": {
          "type": "number"
        },
        "waiting_claims": {
          "type": "int"
        },
        "uptime": {
          "type": "number"
        }
      },
      "optional": {
        "writes": {
          "type": "map",
          "values": {
            "type": "map",
            "keys": {
              "applied": {
                "type": "int"
              },
              "refused": {
                "type": "int"
              }
            }
          }
        },
        "events": {
          "type": "map",
          "keys": {
            "published": {
              "type": "int"
            },
            "dropped": {
              "type": "int"
            }
          }
        },
        "outbox": {
          "type": "map",
          "keys": {
            "pending": {
              "type": "int"
            },
            "lag": {
              "type": "number"
            },
            "drained": {
              "type": "int"
            },
            "rejected": {
              "type": "int"
            },
            "high_water": {
              "type": "int"
            }
          }
        }
      }
    }
  }
};

const SHAPES = {
  "ids": {
    "type": "array",
    "items": {
      "type": "str"
    }
  },
  "headers": {
    "type": "map",
    "values": {
      "type": "str"
    }
  },
  "claimed_job": {
    "type": "map",
    "keys": {
      "id": {
        "type": "str"
      },
      "fence": {
        "type": "int"
      },
      "payload": {
        "type": "bin|str|nil"
      },
      "attempts": {
        "type": "int"
      }
    },
    "optional": {
      "after": "ids",
      "headers": "headers",
      "steps": "steps",
      "signal": {
        "type": "bin|str|nil"
      }
    }
  },
  "steps": {
    "type": "map",
    "values": {
      "type": "bin|str|nil"
    }
  },
  "job_row": {
    "type": "map",
    "record": {
      "keys": {
        "id": {
          "type": "str"
        },
        "queue": {
          "type": "str"
        },
        "state": {
          "type": "str"
        },
        "priority": {
          "type": "int"
        },
        "attempts": {
          "type": "int"
        },
        "max_attempts": {
          "type": "int"
        },
        "fence": {
          "type": "int"
        },
        "owner": {
          "type": "str|nil"
        },
        "until": {
          "type": "number"
        },
        "not_before": {
          "type": "number"
        },
        "error": {
          "type": "str|nil"
        }
      },
      "optional": {
        "created": {
          "type": "number"
        },
        "progress": {
          "type": "str"
        },
        "key": {
          "type": "str"
        },
        "group": {
          "type": "str"
        }
      }
    }
  },
  "schedule": {
    "type": "map",
    "record": {
      "keys": {
        "name": {
          "type": "str"
        },
        "cron": {
          "type": "str"
        },
        "tz": {
          "type": "str"
        },
        "queue": {
          "type": "str"
        },
        "payload": {
          "type": "bin|str|nil"
        },
        "priority": {
          "type": "int"
        },
        "max_attempts": {
          "type": "int"
        },
        "next": {
          "type": "number|nil"
        },
        "last": {
          "type": "number|nil"
        }
      }
    }
  },
  "queue_stats": {
    "type": "map",
    "record": {
      "keys": {
        "ready": {
          "type": "int"
        },
        "delayed": {
          "type": "int"
        },
        "leased": {
          "type": "int"
        },
        "done": {
          "type": "int"
        },
        "dead": {
          "type": "int"
        },
        "oldest_ready_age": {
          "type": "number"
        }
      },
      "optional": {
        "cancelled": {
          "type": "int"
        },
        "blocked": {
          "type": "int"
        },
        "suspended": {
          "type": "int"
        },
        "groups_waiting": {
          "type": "int"
        },
        "paused": {
          "type": "bool"
        },
        "max_leased": {
          "type": "int"
        },
        "rate": {
          "type": "int"
        },
        "per": {
          "type": "number"
        },
        "group_max_leased": {
          "type": "int"
        },
        "group_rate": {
          "type": "int"
        },
        "group_per": {
          "type": "number"
        },
        "group_overrides": {
          "type": "int",
          "min": 1
        },
        "group_config": {
          "type": "map",
          "values": {
            "type": "map",
            "optional": {
              "max_leased": {
                "type": "int"
              },
              "rate": {
                "type": "int"
              },
              "per": {
                "type": "number"
              }
            }
          }
        },
        "keep_done": {
          "type": "number"
        },
        "keep_dead": {
          "type": "number"
        },
        "keep_cancelled": {
          "type": "number"
        },
        "totals": {
          "type": "map",
          "optional": {
            "claimed": {
              "type": "int"
            },
            "completed": {
              "type": "int"
            },
            "failed": {
              "type": "int"
            },
            "retried": {
              "type": "int"
            },
            "dead": {
              "type": "int"
            },
            "expired": {
              "type": "int"
            },
            "removed": {
              "type": "int"
            },
            "deadline_passed": {
              "type": "int"
            },
            "refused": {
              "type": "map",
              "values": {
                "type": "int"
              }
            }
          }
        }
      }
    }
  }
};

module.exports = {
  OPS, NOW_OPS, OPTION_FIELDS, BATCH_FIELDS, ENTRY_FIELDS, ANSWER_OF, ANSWERS, SHAPES,
};
