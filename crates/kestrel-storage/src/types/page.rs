//! Paging: which page of a listing to return, and the page returned.

use serde::{Deserialize, Serialize};

/// Which page of a listing to return. Pages are numbered from 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PageRequest {
    /// The page, from 0.
    pub page: u32,
    /// Items per page; at least 1.
    pub per_page: u32,
}

impl PageRequest {
    /// Page `page` (from 0) of `per_page` items.
    pub fn new(page: u32, per_page: u32) -> Self {
        Self { page, per_page }
    }

    /// The number of items before this page.
    pub fn offset(&self) -> u64 {
        u64::from(self.page) * u64::from(self.per_page)
    }
}

impl Default for PageRequest {
    /// The first page of 100 items.
    fn default() -> Self {
        Self::new(0, 100)
    }
}

/// One page of a listing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Page<T> {
    /// The items of this page, in the listing's order.
    pub items: Vec<T>,
    /// The page number, from 0.
    pub page: u32,
    /// The page size asked for.
    pub per_page: u32,
    /// How many items the whole listing has.
    pub total: u64,
    /// Whether a later page has items.
    pub has_more: bool,
}

impl<T> Page<T> {
    /// A page of `items` out of `total`.
    pub fn new(items: Vec<T>, request: PageRequest, total: u64) -> Self {
        let shown = request.offset() + items.len() as u64;
        Self {
            items,
            page: request.page,
            per_page: request.per_page,
            total,
            has_more: shown < total,
        }
    }
}

/// Ascending or descending.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Oldest (smallest) first.
    Asc,
    /// Newest (largest) first.
    #[default]
    Desc,
}
