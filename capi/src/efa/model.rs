//! The EFA device model behind the C ABI (feature `efa-model`): with `UVERBS_EFA_MODEL=<n>`
//! set, `ibv_get_device_list` also lists `n` model devices, `efa_model0` to
//! `efa_model<n-1>` (an empty or unparsable value: 1; at most 16), all on one process-global
//! fabric, so a C program or pyverbs' `test_efa_srd.py` sends between them without EFA
//! hardware. Each is the model's default device (`ModelConfig::default()`) with completion
//! counters too; device `i` has GID `fe80::<i+1>`.
//!
//! A real device moves data by itself; the model moves it when its fabric is `process()`ed.
//! So the first listing starts a background thread, `uverbs-efa-model`, that processes the
//! fabric for the rest of the process: right after work was found, again at once; when idle,
//! after a pause that grows from 20 µs to 1 ms. Violations the model records (a program
//! breaking the device's rules) are printed to standard error as they are found.
//!
//! The model's doorbell trap (single-stepping each SQ doorbell store with signal handlers) is
//! off here: a C or Python program may have signal handlers of its own (Python's
//! `faulthandler`). The model reads each doorbell word when it processes instead.

use std::sync::OnceLock;
use std::time::Duration;

use uverbs_efa_model::{EfaDevice, EfaFabric, ModelConfig};

/// Most model devices `UVERBS_EFA_MODEL` may ask for.
const MAX_DEVICES: usize = 16;
/// The model devices' node GUIDs: this prefix, then the index.
const GUID_BASE: u64 = 0x0200_0000_0000_0000;

struct Model {
    devs: Vec<(String, EfaDevice)>,
}

static MODEL: OnceLock<Option<Model>> = OnceLock::new();

/// How many devices `UVERBS_EFA_MODEL` asks for (None: unset, or 0).
fn wanted() -> Option<usize> {
    let v = std::env::var("UVERBS_EFA_MODEL").ok()?;
    let n = v.trim().parse::<usize>().unwrap_or(1);
    (n > 0).then_some(n.min(MAX_DEVICES))
}

fn model() -> Option<&'static Model> {
    MODEL
        .get_or_init(|| {
            let n = wanted()?;
            let fabric = EfaFabric::new(0x5eed);
            fabric.set_doorbell_trap(false);
            let cfg = ModelConfig {
                device_caps: ModelConfig::default().device_caps
                    | uverbs::uapi::efa::EFA_QUERY_DEVICE_CAPS_COMP_CNTR,
                ..Default::default()
            };
            let devs = (0..n)
                .map(|i| (format!("efa_model{i}"), fabric.add_device(cfg)))
                .collect();
            let bg = fabric.clone();
            let spawned = std::thread::Builder::new()
                .name("uverbs-efa-model".into())
                .spawn(move || run(bg));
            if let Err(e) = spawned {
                eprintln!("uverbs: EFA model: cannot start its thread ({e}): no traffic moves");
            }
            Some(Model { devs })
        })
        .as_ref()
}

/// The background thread: processes the fabric forever (see the module doc).
fn run(fabric: EfaFabric) {
    let mut idle = Duration::from_micros(20);
    loop {
        let moved = fabric.process();
        for v in fabric.take_violations() {
            eprintln!("uverbs: EFA model violation: {v}");
        }
        if moved > 0 {
            idle = Duration::from_micros(20);
            continue;
        }
        std::thread::sleep(idle);
        idle = (idle * 2).min(Duration::from_millis(1));
    }
}

/// The model's devices, for `ibv_get_device_list` (none without `UVERBS_EFA_MODEL`).
pub fn devices() -> Vec<uverbs::Device> {
    let Some(m) = model() else {
        return Vec::new();
    };
    m.devs
        .iter()
        .enumerate()
        .map(|(i, (name, _))| {
            uverbs::Device::synthetic(name, uverbs::Driver::Efa, GUID_BASE | i as u64)
        })
        .collect()
}

/// A context on `dev` if it is one of the model's devices (None for any other device).
pub fn open(dev: &uverbs::Device) -> Option<uverbs::Result<uverbs::Context>> {
    let m = MODEL.get()?.as_ref()?;
    if !dev.uverbs_name().starts_with("model-") {
        return None;
    }
    let (_, d) = m.devs.iter().find(|(name, _)| name == dev.name())?;
    Some(d.open())
}
