//! A model device with values no real EFA device reports is refused with a clear error —
//! by `ModelConfig::validate`, `EfaFabric::try_add_device` and `EfaDevice::open` — never a
//! panic; the defaults and real-looking variations are accepted.

use uverbs::Errno;
use uverbs_efa_model::{EfaFabric, ModelConfig};

/// Each impossible value, with the field the error must name.
fn impossible() -> Vec<(&'static str, ModelConfig)> {
    let d = ModelConfig::default;
    vec![
        (
            "sub_cqs_per_cq",
            ModelConfig {
                sub_cqs_per_cq: 0,
                ..d()
            },
        ),
        (
            "sub_cqs_per_cq",
            ModelConfig {
                sub_cqs_per_cq: 65,
                ..d()
            },
        ),
        (
            "inline_buf_size",
            ModelConfig {
                inline_buf_size: 33,
                ..d()
            },
        ),
        (
            "inline_buf_size_ex",
            ModelConfig {
                inline_buf_size_ex: 81,
                ..d()
            },
        ),
        (
            "max_llq_size",
            ModelConfig {
                max_llq_size: 0,
                ..d()
            },
        ),
        (
            "max_llq_size",
            ModelConfig {
                max_llq_size: 1024,
                min_sq_wr: 32,
                ..d()
            },
        ),
        (
            "max_tx_batch",
            ModelConfig {
                max_tx_batch: 1,
                inline_buf_size_ex: 80,
                ..d()
            },
        ),
        (
            "min_sq_wr",
            ModelConfig {
                min_sq_wr: 64,
                max_sq_wr: 32,
                ..d()
            },
        ),
        (
            "max_sq_wr",
            ModelConfig {
                max_sq_wr: 0,
                ..d()
            },
        ),
        (
            "max_rq_wr",
            ModelConfig {
                max_rq_wr: 0,
                ..d()
            },
        ),
        (
            "max_sq_sge",
            ModelConfig {
                max_sq_sge: 0,
                ..d()
            },
        ),
        (
            "max_sq_sge",
            ModelConfig {
                max_sq_sge: 3,
                ..d()
            },
        ),
        (
            "max_rq_sge",
            ModelConfig {
                max_rq_sge: 0,
                ..d()
            },
        ),
        (
            "max_rq_sge",
            ModelConfig {
                max_rq_sge: 17,
                ..d()
            },
        ),
        (
            "max_rq_sge",
            ModelConfig {
                max_rq_sge: 100,
                ..d()
            },
        ),
        ("max_cqe", ModelConfig { max_cqe: 0, ..d() }),
        ("mtu", ModelConfig { mtu: 0, ..d() }),
        (
            "max_rdma_size",
            ModelConfig {
                max_rdma_size: 0,
                ..d()
            },
        ),
    ]
}

#[test]
fn impossible_values_are_refused_naming_the_field() {
    for (field, cfg) in impossible() {
        let e = cfg.validate().expect_err(field);
        assert_eq!(e.field, field, "{e}");
        let msg = e.to_string();
        assert!(
            msg.starts_with(&format!("impossible EFA model device: {field} = ")),
            "{msg}"
        );
        let fab = EfaFabric::new(1);
        assert_eq!(fab.try_add_device(cfg).unwrap_err(), e);
        // add_device keeps it; open says why, as an EINVAL naming the operation and device.
        let dev = fab.add_device(cfg);
        let err = dev.open().expect_err(field);
        assert!(err.is(Errno::INVAL), "{err}");
        assert_eq!(err.op(), "open_device");
        assert_eq!(err.object(), "EFA model device efa_0");
        assert_eq!(err.reason(), msg);
    }
}

#[test]
fn real_device_values_are_accepted() {
    let d = ModelConfig::default;
    let ok = [
        d(),
        // No RDMA, no RDMA size.
        ModelConfig {
            device_caps: 0,
            max_rdma_size: 0,
            ..d()
        },
        // 128-byte WQEs with a batch of 2 lines, and no batch limit.
        ModelConfig {
            inline_buf_size_ex: 80,
            max_tx_batch: 2,
            ..d()
        },
        ModelConfig {
            max_tx_batch: 0,
            ..d()
        },
        ModelConfig {
            sub_cqs_per_cq: 1,
            max_sq_sge: 1,
            min_sq_wr: 32,
            ..d()
        },
        // The most receive SGEs the model allows.
        ModelConfig {
            max_rq_sge: 16,
            ..d()
        },
    ];
    for cfg in ok {
        cfg.validate().unwrap();
        let fab = EfaFabric::new(2);
        let dev = fab.try_add_device(cfg).unwrap();
        let ctx = dev.open().unwrap();
        ctx.alloc_pd().unwrap();
    }
}
