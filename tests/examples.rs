//! Runs every example in the soft-RoCE VM.
//!
//! The harness copies test executables into the VM, not examples, so each example keeps its
//! logic in a `pub fn run()` that its `main` calls, and this file compiles the example source
//! as a module and calls that same function: what runs here is exactly the example's code.
//! An example that returns an error (a byte that did not arrive, a completion that failed, a
//! wait past its deadline) fails its test with the example's own message.
//!
//! With the `tokio` feature (which `cargo xtask test` builds the VM's tests with) this file
//! also runs `tokio_echo` and tests `uverbs::tokio` itself.
// Each example brings its own copy of examples/common, exactly as when it is built alone.
#![allow(clippy::duplicate_mod)]

mod common;

use common::NEEDS_DEVICE;

#[allow(dead_code)] // the example's `main` is not called here
#[path = "../examples/rc_write_read.rs"]
mod rc_write_read;

#[allow(dead_code)]
#[path = "../examples/ud_send.rs"]
mod ud_send;

#[allow(dead_code)]
#[path = "../examples/srq_server.rs"]
mod srq_server;

#[allow(dead_code)]
#[path = "../examples/ud_any.rs"]
mod ud_any;

#[allow(dead_code)]
#[path = "../examples/comp_channel.rs"]
mod comp_channel;

#[allow(dead_code)]
#[path = "../examples/rc_dead_peer.rs"]
mod rc_dead_peer;

fn check(name: &str, r: Result<(), Box<dyn std::error::Error + Send + Sync>>) {
    let _ = NEEDS_DEVICE;
    if let Err(e) = r {
        panic!("example {name} failed: {e}");
    }
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn example_rc_write_read() {
    check("rc_write_read", rc_write_read::run());
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn example_rc_dead_peer() {
    check("rc_dead_peer", rc_dead_peer::run());
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn example_ud_send() {
    check("ud_send", ud_send::run());
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn example_ud_any() {
    check("ud_any", ud_any::run());
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn example_srq_server() {
    check("srq_server", srq_server::run());
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn example_comp_channel() {
    check("comp_channel", comp_channel::run());
}

#[cfg(feature = "tokio")]
#[allow(dead_code)]
#[path = "../examples/tokio_echo.rs"]
mod tokio_echo;

#[cfg(feature = "tokio")]
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn example_tokio_echo() {
    check("tokio_echo", tokio_echo::run());
}

/// The examples' set-up helpers, for the tests below.
#[cfg(feature = "tokio")]
#[path = "../examples/common/mod.rs"]
mod example_helpers;

#[cfg(feature = "tokio")]
mod tokio_api {
    use std::time::Duration;

    use uverbs::{AsyncElement, AsyncEventType, Errno};

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .expect("tokio runtime")
    }

    /// Outside a runtime, registering is an error that says so, not a panic.
    #[test]
    #[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
    fn tokio_registration_outside_a_runtime_is_an_error() {
        let ctx = super::common::rxe_context();
        let e = ctx.async_events().unwrap_err();
        assert!(e.is(Errno::INVAL) && e.reason().contains("tokio"), "{e}");
        let ch = ctx.create_comp_channel().expect("create_comp_channel");
        let e = ch.into_async().unwrap_err();
        assert!(e.is(Errno::INVAL) && e.reason().contains("tokio"), "{e}");
    }

    /// Awaiting an event no CQ asked for fails at once instead of hanging; a CQ from another
    /// channel is refused by poll_cq.
    #[test]
    #[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
    fn tokio_unarmed_wait_and_foreign_cq_are_errors() {
        let ctx = super::common::rxe_context();
        runtime().block_on(async {
            let ch = ctx.create_comp_channel().unwrap().into_async().unwrap();
            let other = ctx.create_comp_channel().unwrap();
            let mut foreign = ctx.create_cq(4, Some(&other), 0).unwrap();
            let e = tokio::time::timeout(Duration::from_secs(5), ch.get_cq_event())
                .await
                .expect("an unarmed wait must not hang")
                .unwrap_err();
            assert!(e.is(Errno::INVAL), "{e}");
            let mut wcs = [uverbs::Wc::default(); 4];
            let e = ch.poll_cq(&mut foreign, &mut wcs).await.unwrap_err();
            assert!(e.is(Errno::INVAL), "{e}");
        });
    }

    /// The async event stream delivers the CQ error rxe raises when a CQ overruns, naming the
    /// CQ, while the task sleeps in the reactor.
    #[test]
    #[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
    fn tokio_async_events_deliver_a_cq_overrun() {
        let ctx = super::common::rxe_context();
        runtime().block_on(async {
            let mut events = ctx.async_events().expect("async_events");
            // A second reader of the same fd can be registered too (it registers a dup).
            let second = ctx.async_events().expect("a second async_events");
            drop(second);
            let o = super::common::pair::overrun_a_cq(&ctx);
            let ev = tokio::time::timeout(Duration::from_secs(20), async {
                loop {
                    let ev = events.next().await.expect("async event");
                    if ev.event_type == AsyncEventType::CQ_ERR {
                        return ev;
                    }
                }
            })
            .await
            .expect("no CQ error event within 20 s of overrunning the CQ");
            assert_eq!(
                ev.element,
                AsyncElement::Cq(o.small.user_handle()),
                "{ev:?}"
            );
        });
    }
}
