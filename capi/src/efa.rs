//! (skeleton: efa)

/// The EFA model's devices (feature `efa-model`, `UVERBS_EFA_MODEL` set); none otherwise.
pub fn model_devices() -> Vec<uverbs::Device> {
    Vec::new()
}

/// A context on a model device, or None for a real device.
pub fn open_model(_dev: &uverbs::Device) -> Option<uverbs::Result<uverbs::Context>> {
    None
}
