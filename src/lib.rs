//! uverbs
