# A consumer's worker for the package checks, copied out of the repository and
# run there: `import fenceq` finds only what was installed. It enqueues, claims,
# completes and reads the state of the job JOB (a new id) on the daemon at
# ENDPOINT, and prints where fenceq came from and the state the daemon answers.
# Usage: python worker.py ENDPOINT JOB
import json
import sys

import fenceq

endpoint, job = sys.argv[1], sys.argv[2]
print("module:", fenceq.__file__)
with fenceq.Client(endpoint, timeout=5) as c:
    assert c.enqueue(job) is True
    assert c.enqueue(job) is False  # exists (C3.1)
    fence = c.claim(job, "worker-a", ttl=30)
    assert isinstance(fence, int) and fence > 0, fence
    assert c.claim(job, "worker-b", ttl=30) is None  # leased (C3.3)
    assert c.complete(job, "worker-b", fence, "stolen") is False  # not the owner (C3.5)
    assert c.complete(job, "worker-a", fence, "paid") is True
    print("state:", json.dumps(c.state(job), sort_keys=True))
