//! Async events (`ibv_get_async_event`, `ibv_ack_async_event`).

// The `.symver` directives that give this module's exports their versions.
#[cfg(not(test))]
core::arch::global_asm!(include_str!(concat!(env!("OUT_DIR"), "/symver_events.s")));

use core::ffi::c_int;
use core::ptr::{addr_of, addr_of_mut};

use verbs_abi::{ibv_async_event, ibv_context, ibv_cq, ibv_qp, ibv_srq};

use crate::events::{async_kind, EventCounter};
use crate::guard;
use crate::{context, cq, qp, srq};

/// What an async event's element is, by event type.
enum Element {
    Cq,
    Qp,
    Srq,
    Port,
}

fn element_of(event_type: c_int) -> Element {
    match event_type {
        async_kind::CQ_ERR => Element::Cq,
        1..=7 | async_kind::QP_LAST_WQE_REACHED => Element::Qp,
        14 | async_kind::SRQ_LIMIT_REACHED => Element::Srq,
        _ => Element::Port,
    }
}

/// The event counter of an event's element.
///
/// # Safety
/// `element` must be the live object the event is about.
unsafe fn counter<'a>(event_type: c_int, element: usize) -> Option<&'a EventCounter> {
    // SAFETY: guaranteed by the caller.
    unsafe {
        match element_of(event_type) {
            Element::Cq => Some(&cq::unchecked(element as *mut ibv_cq).shared.async_events),
            Element::Qp => Some(&qp::unchecked(element as *mut ibv_qp).shared.events),
            Element::Srq => Some(&srq::unchecked(element as *mut ibv_srq).shared.events),
            Element::Port => None,
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_async_event(
    ctx: *mut ibv_context,
    event: *mut ibv_async_event,
) -> c_int {
    guard::minus_one(|| {
        let sim = context::from_ibv(ctx)?;
        if event.is_null() {
            return Err(libc::EINVAL);
        }
        let ev = sim.async_q.pop(|e| {
            // SAFETY: the entry was not blanked, so its object has not been
            // destroyed (destroy blanks first, under the same lock).
            if let Some(c) = unsafe { counter(e.event_type, e.element) } {
                c.delivered();
            }
            *e
        })?;
        // SAFETY: event points at the caller's struct; the event type is one
        // of ibv_event_type's members, written as an int.
        unsafe {
            match element_of(ev.event_type) {
                Element::Port => addr_of_mut!((*event).element.port_num).write(ev.element as c_int),
                _ => addr_of_mut!((*event).element.cq).write(ev.element as *mut ibv_cq),
            }
            addr_of_mut!((*event).event_type)
                .cast::<c_int>()
                .write(ev.event_type);
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_ack_async_event(event: *mut ibv_async_event) {
    guard::void(|| {
        if event.is_null() {
            return;
        }
        // SAFETY: event is an event ibv_get_async_event returned; its object
        // cannot be freed before this acknowledgement.
        unsafe {
            let ty = addr_of!((*event).event_type).cast::<c_int>().read();
            let element = match element_of(ty) {
                Element::Port => return,
                _ => (*event).element.cq as usize,
            };
            if element == 0 {
                return;
            }
            if let Some(c) = counter(ty, element) {
                c.acked_with(1, || match element_of(ty) {
                    Element::Cq => {
                        let f = addr_of_mut!((*(element as *mut ibv_cq)).async_events_completed);
                        f.write(f.read().wrapping_add(1));
                    }
                    Element::Qp => {
                        let f = addr_of_mut!((*(element as *mut ibv_qp)).events_completed);
                        f.write(f.read().wrapping_add(1));
                    }
                    Element::Srq => {
                        let f = addr_of_mut!((*(element as *mut ibv_srq)).events_completed);
                        f.write(f.read().wrapping_add(1));
                    }
                    Element::Port => {}
                });
            }
        }
    })
}
