//! rxe provider
