//! efa provider
