"""The controller's side of Redis: policy versions in, switch reports out.

``redis_link`` follows the store (policy and jobs versions, heartbeats,
epochs) and implements the app's ``SwitchObserver``; ``outbox`` is the store
writer, the one thread that carries every Redis write the switches cause.
The app knows neither: it reports through ``controller.openflow.observer``.
"""
