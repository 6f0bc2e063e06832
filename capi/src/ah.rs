//! (skeleton: ah)
