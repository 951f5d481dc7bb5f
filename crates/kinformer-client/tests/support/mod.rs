//! What the integration tests share: `Api`'s list and watch through the `ListWatch` seam, with
//! the client's own error taken back out of the neutral one, so that a test can check the exact
//! variant. Every error `Api` gives carries one; a test fails if it does not.

#![allow(dead_code, unreachable_pub)]

use std::pin::Pin;

use futures_util::{Stream, StreamExt as _};
use kinformer_client::{Api, Error};
use kinformer_core::list_watch::{self, ListWatch};
use kinformer_core::{ListParams, Object, ObjectList, WatchEvent, WatchParams};
use serde::de::DeserializeOwned;

/// A watch whose errors are the client's own.
pub type Events<K> = Pin<Box<dyn Stream<Item = Result<WatchEvent<K>, Error>> + Send>>;

/// The client's error a neutral one carries.
pub fn rich(e: list_watch::Error) -> Error {
    match Error::try_from(e) {
        Ok(rich) => rich,
        Err(e) => panic!("an error from Api without the client's error: {e:?}"),
    }
}

/// `Api`'s list and watch with the client's own errors.
#[allow(async_fn_in_trait)]
pub trait RichErrors<K> {
    /// [`ListWatch::list`], its error the client's.
    async fn list_rich(&self, params: &ListParams) -> Result<ObjectList<K>, Error>;
    /// [`ListWatch::watch`], its errors (opening it, and on the stream) the client's.
    async fn watch_rich(&self, params: &WatchParams) -> Result<Events<K>, Error>;
}

impl<K: Object + DeserializeOwned + 'static> RichErrors<K> for Api<K> {
    async fn list_rich(&self, params: &ListParams) -> Result<ObjectList<K>, Error> {
        ListWatch::list(self, params).await.map_err(rich)
    }

    async fn watch_rich(&self, params: &WatchParams) -> Result<Events<K>, Error> {
        let events = ListWatch::watch(self, params).await.map_err(rich)?;
        Ok(Box::pin(events.map(|event| event.map_err(rich))))
    }
}
