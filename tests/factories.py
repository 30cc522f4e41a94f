import factory
from django.contrib.auth import get_user_model
from django.utils import timezone


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()

    username = factory.Sequence(lambda n: f"researcher{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.org")
    password = factory.django.Password("correct horse battery staple")


class WorkerNodeFactory(factory.django.DjangoModelFactory):
    """A worker online for a hardware profile (``hardware_profile="cpu-dev"`` by default),
    with a fresh heartbeat: its queue counts as served."""

    class Meta:
        model = "fleet.WorkerNode"

    name = factory.Sequence(lambda n: f"eval-{n}@tests")
    hostname = "tests"
    hardware_profile = "cpu-dev"
    queues = factory.LazyAttribute(lambda w: [f"eval.{w.hardware_profile}"])
    status = "online"
    started_at = factory.LazyFunction(timezone.now)
    last_heartbeat_at = factory.LazyFunction(timezone.now)
