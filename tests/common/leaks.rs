//! Leak-check counters for the soft-RoCE VM tests: the kernel's verbs objects as
//! `rdma resource show` lists them, and this process's mappings of uverbs device memory.

/// The task id of the calling thread. The kernel records the creating *thread* as the owner
/// of a verbs object (`rdma resource show` prints it as `pid`), and tests run on libtest's
/// worker threads, so per-test counts filter on this, not on the process id.
pub fn thread_id() -> String {
    std::fs::read_link("/proc/thread-self")
        .expect("/proc/thread-self")
        .file_name()
        .expect("task id")
        .to_string_lossy()
        .into_owned()
}

/// The output of `/usr/bin/rdma resource show <kind>` (`ctx`, `pd`, `mr`, `cq`, `srq`, `qp`);
/// fails the test, with rdma's stderr, if the command fails.
pub fn rdma_resource_show(kind: &str) -> String {
    let out = std::process::Command::new("/usr/bin/rdma")
        .args(["resource", "show", kind])
        .output()
        .expect("run /usr/bin/rdma resource show");
    assert!(
        out.status.success(),
        "rdma resource show {kind}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Kernel objects of `kind` of every task. Only meaningful where nothing else in the VM
/// creates verbs objects meanwhile (used when several threads of one test create them).
pub fn kernel_objects(kind: &str) -> usize {
    rdma_resource_show(kind)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count()
}

/// Kernel objects of `kind` owned by task `tid` (see [`thread_id`]): not disturbed by other
/// tests' threads.
pub fn kernel_objects_of_task(kind: &str, tid: &str) -> usize {
    rdma_resource_show(kind)
        .lines()
        .filter(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.windows(2).any(|p| p[0] == "pid" && p[1] == tid)
        })
        .count()
}

/// Mappings of uverbs device memory (queue rings, doorbells): `/dev/infiniband/uverbsN` in
/// `/proc/self/maps`. Unlike all mappings, the allocator cannot make this count move.
pub fn device_mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .map(|s| s.lines().filter(|l| l.contains("/dev/infiniband/")).count())
        .unwrap_or(0)
}
