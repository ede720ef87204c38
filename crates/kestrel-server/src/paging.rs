//! What the instance-wide listings share (scores, datasets, experiments): `?page=&perPage=`,
//! the `pagination` of a page, and the refusal of callers pinned to a resource.

use axum::http::StatusCode;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::ApiError;
use crate::auth::Caller;

/// `?page=&perPage=`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct PageQuery {
    /// The page, from 0.
    #[schemars(range(max = 100_000))]
    pub page: Option<u32>,
    /// Per page (default 20, at most 100).
    #[schemars(range(min = 1, max = 100))]
    pub per_page: Option<u32>,
}

/// `page` and `per_page` when they are in bounds (a 400 naming the one that is not); `0`
/// stands for "not given".
pub(crate) fn checked_page(
    page: Option<u32>,
    per_page: Option<u32>,
) -> Result<(u32, u32), ApiError> {
    if per_page.is_some_and(|n| !(1..=100).contains(&n)) {
        return Err(ApiError::invalid_query("perPage must be between 1 and 100"));
    }
    if page.is_some_and(|n| n > 100_000) {
        return Err(ApiError::invalid_query("page must be at most 100000"));
    }
    Ok((page.unwrap_or(0), per_page.unwrap_or(0)))
}

/// Where a page is.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Pagination {
    /// In all.
    pub total: usize,
    /// This page.
    pub page: u32,
    /// Per page.
    pub per_page: u32,
    /// Whether a later page has more.
    pub has_more: bool,
}

impl Pagination {
    /// Page `page` of `per_page`, of `total` in all.
    pub fn new(total: usize, page: u32, per_page: u32) -> Self {
        Self {
            total,
            page,
            per_page,
            has_more: total > (page as usize + 1) * per_page as usize,
        }
    }
}

/// Refuses a caller pinned to a resource: `what` (`scores`, `datasets`) is the instance's.
pub(crate) fn unpinned(caller: &Caller, what: &str) -> Result<(), ApiError> {
    match caller.resource {
        None => Ok(()),
        Some(_) => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!("{what} are not kept per resource: use a token that is not pinned to one"),
        )),
    }
}
