//! Work completions (`struct ibv_wc`) and their status, opcode and flag types: the vocabulary
//! the providers write when they poll (`uverbs_wr`), as they are.

#[doc(inline)]
pub use uverbs_wr::{Wc, WcFlags, WcOpcode, WcStatus};
