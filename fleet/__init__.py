"""The GPU worker fleet: which Celery workers are up, on which queues and hardware, with
which GPU, versions and measured ceilings, and how deep each queue is."""
