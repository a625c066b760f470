from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ServiceEnvironmentState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SERVICE_ENVIRONMENT_STATE_UNSPECIFIED: _ClassVar[ServiceEnvironmentState]
    SERVICE_ENVIRONMENT_STATE_ENABLED: _ClassVar[ServiceEnvironmentState]
    SERVICE_ENVIRONMENT_STATE_DISABLED: _ClassVar[ServiceEnvironmentState]

class QueueState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    QUEUE_STATE_UNSPECIFIED: _ClassVar[QueueState]
    QUEUE_STATE_ENABLED: _ClassVar[QueueState]
    QUEUE_STATE_DISABLED: _ClassVar[QueueState]

class QuotaShareState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    QUOTA_SHARE_STATE_UNSPECIFIED: _ClassVar[QuotaShareState]
    QUOTA_SHARE_STATE_ENABLED: _ClassVar[QuotaShareState]
    QUOTA_SHARE_STATE_DISABLED: _ClassVar[QuotaShareState]

class IdleResourceAssignmentStrategy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    IDLE_RESOURCE_ASSIGNMENT_STRATEGY_UNSPECIFIED: _ClassVar[IdleResourceAssignmentStrategy]
    IDLE_RESOURCE_ASSIGNMENT_STRATEGY_FIFO: _ClassVar[IdleResourceAssignmentStrategy]

class SharingStrategy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SHARING_STRATEGY_UNSPECIFIED: _ClassVar[SharingStrategy]
    SHARING_STRATEGY_RESERVE: _ClassVar[SharingStrategy]
    SHARING_STRATEGY_LEND: _ClassVar[SharingStrategy]
    SHARING_STRATEGY_LEND_AND_BORROW: _ClassVar[SharingStrategy]

class InSharePreemption(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    IN_SHARE_PREEMPTION_UNSPECIFIED: _ClassVar[InSharePreemption]
    IN_SHARE_PREEMPTION_ENABLED: _ClassVar[InSharePreemption]
    IN_SHARE_PREEMPTION_DISABLED: _ClassVar[InSharePreemption]

class JobStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_STATUS_UNSPECIFIED: _ClassVar[JobStatus]
    JOB_STATUS_SUBMITTED: _ClassVar[JobStatus]
    JOB_STATUS_RUNNABLE: _ClassVar[JobStatus]
    JOB_STATUS_SCHEDULED: _ClassVar[JobStatus]
    JOB_STATUS_STARTING: _ClassVar[JobStatus]
    JOB_STATUS_RUNNING: _ClassVar[JobStatus]
    JOB_STATUS_SUCCEEDED: _ClassVar[JobStatus]
    JOB_STATUS_FAILED: _ClassVar[JobStatus]
    JOB_STATUS_PENDING: _ClassVar[JobStatus]

class RetryAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RETRY_ACTION_UNSPECIFIED: _ClassVar[RetryAction]
    RETRY_ACTION_RETRY: _ClassVar[RetryAction]
    RETRY_ACTION_EXIT: _ClassVar[RetryAction]

class WarmPoolStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WARM_POOL_STATUS_UNSPECIFIED: _ClassVar[WarmPoolStatus]
    WARM_POOL_STATUS_AVAILABLE: _ClassVar[WarmPoolStatus]
    WARM_POOL_STATUS_IN_USE: _ClassVar[WarmPoolStatus]
    WARM_POOL_STATUS_REUSED: _ClassVar[WarmPoolStatus]
    WARM_POOL_STATUS_TERMINATED: _ClassVar[WarmPoolStatus]

class NodeState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NODE_STATE_UNSPECIFIED: _ClassVar[NodeState]
    NODE_STATE_HEALTHY: _ClassVar[NodeState]
    NODE_STATE_DRAINED: _ClassVar[NodeState]
    NODE_STATE_LOST: _ClassVar[NodeState]

class WaitReasonCode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WAIT_REASON_CODE_UNSPECIFIED: _ClassVar[WaitReasonCode]
    WAIT_REASON_CODE_SHARE_AT_LIMIT: _ClassVar[WaitReasonCode]
    WAIT_REASON_CODE_BORROW_LIMIT_REACHED: _ClassVar[WaitReasonCode]
    WAIT_REASON_CODE_NO_LENDABLE_CAPACITY: _ClassVar[WaitReasonCode]
    WAIT_REASON_CODE_RESERVE_HELD_BACK: _ClassVar[WaitReasonCode]
    WAIT_REASON_CODE_BEHIND_IN_SHARE: _ClassVar[WaitReasonCode]
    WAIT_REASON_CODE_WAITING_FOR_STOP: _ClassVar[WaitReasonCode]
    WAIT_REASON_CODE_NOT_ENOUGH_FREE_HOSTS: _ClassVar[WaitReasonCode]
    WAIT_REASON_CODE_MISCONFIGURATION: _ClassVar[WaitReasonCode]
    WAIT_REASON_CODE_ENVIRONMENT_DISABLED: _ClassVar[WaitReasonCode]
    WAIT_REASON_CODE_AWAITING_PASS: _ClassVar[WaitReasonCode]

class ResourceStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RESOURCE_STATUS_UNSPECIFIED: _ClassVar[ResourceStatus]
    RESOURCE_STATUS_CREATING: _ClassVar[ResourceStatus]
    RESOURCE_STATUS_UPDATING: _ClassVar[ResourceStatus]
    RESOURCE_STATUS_DELETING: _ClassVar[ResourceStatus]
    RESOURCE_STATUS_DELETED: _ClassVar[ResourceStatus]
    RESOURCE_STATUS_VALID: _ClassVar[ResourceStatus]
    RESOURCE_STATUS_INVALID: _ClassVar[ResourceStatus]
SERVICE_ENVIRONMENT_STATE_UNSPECIFIED: ServiceEnvironmentState
SERVICE_ENVIRONMENT_STATE_ENABLED: ServiceEnvironmentState
SERVICE_ENVIRONMENT_STATE_DISABLED: ServiceEnvironmentState
QUEUE_STATE_UNSPECIFIED: QueueState
QUEUE_STATE_ENABLED: QueueState
QUEUE_STATE_DISABLED: QueueState
QUOTA_SHARE_STATE_UNSPECIFIED: QuotaShareState
QUOTA_SHARE_STATE_ENABLED: QuotaShareState
QUOTA_SHARE_STATE_DISABLED: QuotaShareState
IDLE_RESOURCE_ASSIGNMENT_STRATEGY_UNSPECIFIED: IdleResourceAssignmentStrategy
IDLE_RESOURCE_ASSIGNMENT_STRATEGY_FIFO: IdleResourceAssignmentStrategy
SHARING_STRATEGY_UNSPECIFIED: SharingStrategy
SHARING_STRATEGY_RESERVE: SharingStrategy
SHARING_STRATEGY_LEND: SharingStrategy
SHARING_STRATEGY_LEND_AND_BORROW: SharingStrategy
IN_SHARE_PREEMPTION_UNSPECIFIED: InSharePreemption
IN_SHARE_PREEMPTION_ENABLED: InSharePreemption
IN_SHARE_PREEMPTION_DISABLED: InSharePreemption
JOB_STATUS_UNSPECIFIED: JobStatus
JOB_STATUS_SUBMITTED: JobStatus
JOB_STATUS_RUNNABLE: JobStatus
JOB_STATUS_SCHEDULED: JobStatus
JOB_STATUS_STARTING: JobStatus
JOB_STATUS_RUNNING: JobStatus
JOB_STATUS_SUCCEEDED: JobStatus
JOB_STATUS_FAILED: JobStatus
JOB_STATUS_PENDING: JobStatus
RETRY_ACTION_UNSPECIFIED: RetryAction
RETRY_ACTION_RETRY: RetryAction
RETRY_ACTION_EXIT: RetryAction
WARM_POOL_STATUS_UNSPECIFIED: WarmPoolStatus
WARM_POOL_STATUS_AVAILABLE: WarmPoolStatus
WARM_POOL_STATUS_IN_USE: WarmPoolStatus
WARM_POOL_STATUS_REUSED: WarmPoolStatus
WARM_POOL_STATUS_TERMINATED: WarmPoolStatus
NODE_STATE_UNSPECIFIED: NodeState
NODE_STATE_HEALTHY: NodeState
NODE_STATE_DRAINED: NodeState
NODE_STATE_LOST: NodeState
WAIT_REASON_CODE_UNSPECIFIED: WaitReasonCode
WAIT_REASON_CODE_SHARE_AT_LIMIT: WaitReasonCode
WAIT_REASON_CODE_BORROW_LIMIT_REACHED: WaitReasonCode
WAIT_REASON_CODE_NO_LENDABLE_CAPACITY: WaitReasonCode
WAIT_REASON_CODE_RESERVE_HELD_BACK: WaitReasonCode
WAIT_REASON_CODE_BEHIND_IN_SHARE: WaitReasonCode
WAIT_REASON_CODE_WAITING_FOR_STOP: WaitReasonCode
WAIT_REASON_CODE_NOT_ENOUGH_FREE_HOSTS: WaitReasonCode
WAIT_REASON_CODE_MISCONFIGURATION: WaitReasonCode
WAIT_REASON_CODE_ENVIRONMENT_DISABLED: WaitReasonCode
WAIT_REASON_CODE_AWAITING_PASS: WaitReasonCode
RESOURCE_STATUS_UNSPECIFIED: ResourceStatus
RESOURCE_STATUS_CREATING: ResourceStatus
RESOURCE_STATUS_UPDATING: ResourceStatus
RESOURCE_STATUS_DELETING: ResourceStatus
RESOURCE_STATUS_DELETED: ResourceStatus
RESOURCE_STATUS_VALID: ResourceStatus
RESOURCE_STATUS_INVALID: ResourceStatus

class WaitReason(_message.Message):
    __slots__ = ("code", "message", "instances_needed", "share_units", "share_limit", "units_free", "jobs_ahead", "job_ids", "quota_share_names")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    INSTANCES_NEEDED_FIELD_NUMBER: _ClassVar[int]
    SHARE_UNITS_FIELD_NUMBER: _ClassVar[int]
    SHARE_LIMIT_FIELD_NUMBER: _ClassVar[int]
    UNITS_FREE_FIELD_NUMBER: _ClassVar[int]
    JOBS_AHEAD_FIELD_NUMBER: _ClassVar[int]
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    QUOTA_SHARE_NAMES_FIELD_NUMBER: _ClassVar[int]
    code: WaitReasonCode
    message: str
    instances_needed: int
    share_units: int
    share_limit: int
    units_free: int
    jobs_ahead: int
    job_ids: _containers.RepeatedScalarFieldContainer[str]
    quota_share_names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, code: _Optional[_Union[WaitReasonCode, str]] = ..., message: _Optional[str] = ..., instances_needed: _Optional[int] = ..., share_units: _Optional[int] = ..., share_limit: _Optional[int] = ..., units_free: _Optional[int] = ..., jobs_ahead: _Optional[int] = ..., job_ids: _Optional[_Iterable[str]] = ..., quota_share_names: _Optional[_Iterable[str]] = ...) -> None: ...

class CapacityLimit(_message.Message):
    __slots__ = ("capacity_unit", "max_capacity")
    CAPACITY_UNIT_FIELD_NUMBER: _ClassVar[int]
    MAX_CAPACITY_FIELD_NUMBER: _ClassVar[int]
    capacity_unit: str
    max_capacity: int
    def __init__(self, capacity_unit: _Optional[str] = ..., max_capacity: _Optional[int] = ...) -> None: ...

class CapacityUsage(_message.Message):
    __slots__ = ("capacity_unit", "quantity")
    CAPACITY_UNIT_FIELD_NUMBER: _ClassVar[int]
    QUANTITY_FIELD_NUMBER: _ClassVar[int]
    capacity_unit: str
    quantity: int
    def __init__(self, capacity_unit: _Optional[str] = ..., quantity: _Optional[int] = ...) -> None: ...

class ShareCapacityUsage(_message.Message):
    __slots__ = ("capacity_unit", "quantity", "max_capacity", "borrowed")
    CAPACITY_UNIT_FIELD_NUMBER: _ClassVar[int]
    QUANTITY_FIELD_NUMBER: _ClassVar[int]
    MAX_CAPACITY_FIELD_NUMBER: _ClassVar[int]
    BORROWED_FIELD_NUMBER: _ClassVar[int]
    capacity_unit: str
    quantity: int
    max_capacity: int
    borrowed: int
    def __init__(self, capacity_unit: _Optional[str] = ..., quantity: _Optional[int] = ..., max_capacity: _Optional[int] = ..., borrowed: _Optional[int] = ...) -> None: ...

class EnvironmentCapacity(_message.Message):
    __slots__ = ("capacity_unit", "max_capacity", "usable_capacity", "in_use")
    CAPACITY_UNIT_FIELD_NUMBER: _ClassVar[int]
    MAX_CAPACITY_FIELD_NUMBER: _ClassVar[int]
    USABLE_CAPACITY_FIELD_NUMBER: _ClassVar[int]
    IN_USE_FIELD_NUMBER: _ClassVar[int]
    capacity_unit: str
    max_capacity: int
    usable_capacity: int
    in_use: int
    def __init__(self, capacity_unit: _Optional[str] = ..., max_capacity: _Optional[int] = ..., usable_capacity: _Optional[int] = ..., in_use: _Optional[int] = ...) -> None: ...

class KeyValuesPair(_message.Message):
    __slots__ = ("name", "values")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    name: str
    values: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., values: _Optional[_Iterable[str]] = ...) -> None: ...

class ApiError(_message.Message):
    __slots__ = ("code", "message", "field")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    FIELD_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    field: str
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ..., field: _Optional[str] = ...) -> None: ...

class ServiceEnvironmentDetail(_message.Message):
    __slots__ = ("service_environment_name", "service_environment_arn", "state", "capacity_limits", "capacity", "created_at", "tags", "status", "status_reason", "service_environment_type")
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SERVICE_ENVIRONMENT_NAME_FIELD_NUMBER: _ClassVar[int]
    SERVICE_ENVIRONMENT_ARN_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_LIMITS_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    STATUS_REASON_FIELD_NUMBER: _ClassVar[int]
    SERVICE_ENVIRONMENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    service_environment_name: str
    service_environment_arn: str
    state: ServiceEnvironmentState
    capacity_limits: _containers.RepeatedCompositeFieldContainer[CapacityLimit]
    capacity: _containers.RepeatedCompositeFieldContainer[EnvironmentCapacity]
    created_at: int
    tags: _containers.ScalarMap[str, str]
    status: ResourceStatus
    status_reason: str
    service_environment_type: str
    def __init__(self, service_environment_name: _Optional[str] = ..., service_environment_arn: _Optional[str] = ..., state: _Optional[_Union[ServiceEnvironmentState, str]] = ..., capacity_limits: _Optional[_Iterable[_Union[CapacityLimit, _Mapping]]] = ..., capacity: _Optional[_Iterable[_Union[EnvironmentCapacity, _Mapping]]] = ..., created_at: _Optional[int] = ..., tags: _Optional[_Mapping[str, str]] = ..., status: _Optional[_Union[ResourceStatus, str]] = ..., status_reason: _Optional[str] = ..., service_environment_type: _Optional[str] = ...) -> None: ...

class CreateServiceEnvironmentRequest(_message.Message):
    __slots__ = ("service_environment_name", "capacity_limits", "state", "tags", "service_environment_type")
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SERVICE_ENVIRONMENT_NAME_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_LIMITS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    SERVICE_ENVIRONMENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    service_environment_name: str
    capacity_limits: _containers.RepeatedCompositeFieldContainer[CapacityLimit]
    state: ServiceEnvironmentState
    tags: _containers.ScalarMap[str, str]
    service_environment_type: str
    def __init__(self, service_environment_name: _Optional[str] = ..., capacity_limits: _Optional[_Iterable[_Union[CapacityLimit, _Mapping]]] = ..., state: _Optional[_Union[ServiceEnvironmentState, str]] = ..., tags: _Optional[_Mapping[str, str]] = ..., service_environment_type: _Optional[str] = ...) -> None: ...

class CreateServiceEnvironmentResponse(_message.Message):
    __slots__ = ("service_environment_name", "service_environment_arn")
    SERVICE_ENVIRONMENT_NAME_FIELD_NUMBER: _ClassVar[int]
    SERVICE_ENVIRONMENT_ARN_FIELD_NUMBER: _ClassVar[int]
    service_environment_name: str
    service_environment_arn: str
    def __init__(self, service_environment_name: _Optional[str] = ..., service_environment_arn: _Optional[str] = ...) -> None: ...

class UpdateServiceEnvironmentRequest(_message.Message):
    __slots__ = ("service_environment", "state", "capacity_limits")
    SERVICE_ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_LIMITS_FIELD_NUMBER: _ClassVar[int]
    service_environment: str
    state: ServiceEnvironmentState
    capacity_limits: _containers.RepeatedCompositeFieldContainer[CapacityLimit]
    def __init__(self, service_environment: _Optional[str] = ..., state: _Optional[_Union[ServiceEnvironmentState, str]] = ..., capacity_limits: _Optional[_Iterable[_Union[CapacityLimit, _Mapping]]] = ...) -> None: ...

class UpdateServiceEnvironmentResponse(_message.Message):
    __slots__ = ("service_environment_name", "service_environment_arn")
    SERVICE_ENVIRONMENT_NAME_FIELD_NUMBER: _ClassVar[int]
    SERVICE_ENVIRONMENT_ARN_FIELD_NUMBER: _ClassVar[int]
    service_environment_name: str
    service_environment_arn: str
    def __init__(self, service_environment_name: _Optional[str] = ..., service_environment_arn: _Optional[str] = ...) -> None: ...

class DescribeServiceEnvironmentsRequest(_message.Message):
    __slots__ = ("service_environments", "max_results", "next_token")
    SERVICE_ENVIRONMENTS_FIELD_NUMBER: _ClassVar[int]
    MAX_RESULTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    service_environments: _containers.RepeatedScalarFieldContainer[str]
    max_results: int
    next_token: str
    def __init__(self, service_environments: _Optional[_Iterable[str]] = ..., max_results: _Optional[int] = ..., next_token: _Optional[str] = ...) -> None: ...

class DescribeServiceEnvironmentsResponse(_message.Message):
    __slots__ = ("service_environments", "next_token")
    SERVICE_ENVIRONMENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    service_environments: _containers.RepeatedCompositeFieldContainer[ServiceEnvironmentDetail]
    next_token: str
    def __init__(self, service_environments: _Optional[_Iterable[_Union[ServiceEnvironmentDetail, _Mapping]]] = ..., next_token: _Optional[str] = ...) -> None: ...

class QuotaSharePolicy(_message.Message):
    __slots__ = ("idle_resource_assignment_strategy",)
    IDLE_RESOURCE_ASSIGNMENT_STRATEGY_FIELD_NUMBER: _ClassVar[int]
    idle_resource_assignment_strategy: IdleResourceAssignmentStrategy
    def __init__(self, idle_resource_assignment_strategy: _Optional[_Union[IdleResourceAssignmentStrategy, str]] = ...) -> None: ...

class CreateSchedulingPolicyRequest(_message.Message):
    __slots__ = ("name", "quota_share_policy", "tags")
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    QUOTA_SHARE_POLICY_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    name: str
    quota_share_policy: QuotaSharePolicy
    tags: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., quota_share_policy: _Optional[_Union[QuotaSharePolicy, _Mapping]] = ..., tags: _Optional[_Mapping[str, str]] = ...) -> None: ...

class CreateSchedulingPolicyResponse(_message.Message):
    __slots__ = ("name", "arn")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARN_FIELD_NUMBER: _ClassVar[int]
    name: str
    arn: str
    def __init__(self, name: _Optional[str] = ..., arn: _Optional[str] = ...) -> None: ...

class ServiceEnvironmentOrder(_message.Message):
    __slots__ = ("order", "service_environment")
    ORDER_FIELD_NUMBER: _ClassVar[int]
    SERVICE_ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    order: int
    service_environment: str
    def __init__(self, order: _Optional[int] = ..., service_environment: _Optional[str] = ...) -> None: ...

class JobQueueDetail(_message.Message):
    __slots__ = ("job_queue_name", "job_queue_arn", "state", "scheduling_policy_arn", "service_environment_order", "created_at", "tags", "status", "status_reason", "job_queue_type", "priority")
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    JOB_QUEUE_NAME_FIELD_NUMBER: _ClassVar[int]
    JOB_QUEUE_ARN_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    SCHEDULING_POLICY_ARN_FIELD_NUMBER: _ClassVar[int]
    SERVICE_ENVIRONMENT_ORDER_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    STATUS_REASON_FIELD_NUMBER: _ClassVar[int]
    JOB_QUEUE_TYPE_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    job_queue_name: str
    job_queue_arn: str
    state: QueueState
    scheduling_policy_arn: str
    service_environment_order: _containers.RepeatedCompositeFieldContainer[ServiceEnvironmentOrder]
    created_at: int
    tags: _containers.ScalarMap[str, str]
    status: ResourceStatus
    status_reason: str
    job_queue_type: str
    priority: int
    def __init__(self, job_queue_name: _Optional[str] = ..., job_queue_arn: _Optional[str] = ..., state: _Optional[_Union[QueueState, str]] = ..., scheduling_policy_arn: _Optional[str] = ..., service_environment_order: _Optional[_Iterable[_Union[ServiceEnvironmentOrder, _Mapping]]] = ..., created_at: _Optional[int] = ..., tags: _Optional[_Mapping[str, str]] = ..., status: _Optional[_Union[ResourceStatus, str]] = ..., status_reason: _Optional[str] = ..., job_queue_type: _Optional[str] = ..., priority: _Optional[int] = ...) -> None: ...

class CreateJobQueueRequest(_message.Message):
    __slots__ = ("job_queue_name", "state", "scheduling_policy_arn", "service_environment_order", "tags", "job_queue_type", "priority")
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    JOB_QUEUE_NAME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    SCHEDULING_POLICY_ARN_FIELD_NUMBER: _ClassVar[int]
    SERVICE_ENVIRONMENT_ORDER_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    JOB_QUEUE_TYPE_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    job_queue_name: str
    state: QueueState
    scheduling_policy_arn: str
    service_environment_order: _containers.RepeatedCompositeFieldContainer[ServiceEnvironmentOrder]
    tags: _containers.ScalarMap[str, str]
    job_queue_type: str
    priority: int
    def __init__(self, job_queue_name: _Optional[str] = ..., state: _Optional[_Union[QueueState, str]] = ..., scheduling_policy_arn: _Optional[str] = ..., service_environment_order: _Optional[_Iterable[_Union[ServiceEnvironmentOrder, _Mapping]]] = ..., tags: _Optional[_Mapping[str, str]] = ..., job_queue_type: _Optional[str] = ..., priority: _Optional[int] = ...) -> None: ...

class CreateJobQueueResponse(_message.Message):
    __slots__ = ("job_queue_name", "job_queue_arn")
    JOB_QUEUE_NAME_FIELD_NUMBER: _ClassVar[int]
    JOB_QUEUE_ARN_FIELD_NUMBER: _ClassVar[int]
    job_queue_name: str
    job_queue_arn: str
    def __init__(self, job_queue_name: _Optional[str] = ..., job_queue_arn: _Optional[str] = ...) -> None: ...

class UpdateJobQueueRequest(_message.Message):
    __slots__ = ("job_queue", "state", "scheduling_policy_arn", "priority")
    JOB_QUEUE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    SCHEDULING_POLICY_ARN_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    job_queue: str
    state: QueueState
    scheduling_policy_arn: str
    priority: int
    def __init__(self, job_queue: _Optional[str] = ..., state: _Optional[_Union[QueueState, str]] = ..., scheduling_policy_arn: _Optional[str] = ..., priority: _Optional[int] = ...) -> None: ...

class UpdateJobQueueResponse(_message.Message):
    __slots__ = ("job_queue_name", "job_queue_arn")
    JOB_QUEUE_NAME_FIELD_NUMBER: _ClassVar[int]
    JOB_QUEUE_ARN_FIELD_NUMBER: _ClassVar[int]
    job_queue_name: str
    job_queue_arn: str
    def __init__(self, job_queue_name: _Optional[str] = ..., job_queue_arn: _Optional[str] = ...) -> None: ...

class DescribeJobQueuesRequest(_message.Message):
    __slots__ = ("job_queues", "max_results", "next_token")
    JOB_QUEUES_FIELD_NUMBER: _ClassVar[int]
    MAX_RESULTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    job_queues: _containers.RepeatedScalarFieldContainer[str]
    max_results: int
    next_token: str
    def __init__(self, job_queues: _Optional[_Iterable[str]] = ..., max_results: _Optional[int] = ..., next_token: _Optional[str] = ...) -> None: ...

class DescribeJobQueuesResponse(_message.Message):
    __slots__ = ("job_queues", "next_token")
    JOB_QUEUES_FIELD_NUMBER: _ClassVar[int]
    NEXT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    job_queues: _containers.RepeatedCompositeFieldContainer[JobQueueDetail]
    next_token: str
    def __init__(self, job_queues: _Optional[_Iterable[_Union[JobQueueDetail, _Mapping]]] = ..., next_token: _Optional[str] = ...) -> None: ...

class GetJobQueueSnapshotRequest(_message.Message):
    __slots__ = ("job_queue", "max_results")
    JOB_QUEUE_FIELD_NUMBER: _ClassVar[int]
    MAX_RESULTS_FIELD_NUMBER: _ClassVar[int]
    job_queue: str
    max_results: int
    def __init__(self, job_queue: _Optional[str] = ..., max_results: _Optional[int] = ...) -> None: ...

class FrontOfQueueJob(_message.Message):
    __slots__ = ("job_id", "job_name", "job_arn", "quota_share_name", "scheduling_priority", "created_at", "status_reason", "wait_reason", "earliest_time_at_position")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_NAME_FIELD_NUMBER: _ClassVar[int]
    JOB_ARN_FIELD_NUMBER: _ClassVar[int]
    QUOTA_SHARE_NAME_FIELD_NUMBER: _ClassVar[int]
    SCHEDULING_PRIORITY_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    STATUS_REASON_FIELD_NUMBER: _ClassVar[int]
    WAIT_REASON_FIELD_NUMBER: _ClassVar[int]
    EARLIEST_TIME_AT_POSITION_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_name: str
    job_arn: str
    quota_share_name: str
    scheduling_priority: int
    created_at: int
    status_reason: str
    wait_reason: WaitReason
    earliest_time_at_position: int
    def __init__(self, job_id: _Optional[str] = ..., job_name: _Optional[str] = ..., job_arn: _Optional[str] = ..., quota_share_name: _Optional[str] = ..., scheduling_priority: _Optional[int] = ..., created_at: _Optional[int] = ..., status_reason: _Optional[str] = ..., wait_reason: _Optional[_Union[WaitReason, _Mapping]] = ..., earliest_time_at_position: _Optional[int] = ...) -> None: ...

class QuotaShareSnapshot(_message.Message):
    __slots__ = ("quota_share_name", "head_job_ids", "capacity_usage")
    QUOTA_SHARE_NAME_FIELD_NUMBER: _ClassVar[int]
    HEAD_JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_USAGE_FIELD_NUMBER: _ClassVar[int]
    quota_share_name: str
    head_job_ids: _containers.RepeatedScalarFieldContainer[str]
    capacity_usage: _containers.RepeatedCompositeFieldContainer[ShareCapacityUsage]
    def __init__(self, quota_share_name: _Optional[str] = ..., head_job_ids: _Optional[_Iterable[str]] = ..., capacity_usage: _Optional[_Iterable[_Union[ShareCapacityUsage, _Mapping]]] = ...) -> None: ...

class GetJobQueueSnapshotResponse(_message.Message):
    __slots__ = ("job_queue_name", "front_of_queue", "quota_shares", "last_updated_at", "total_capacity_usage")
    JOB_QUEUE_NAME_FIELD_NUMBER: _ClassVar[int]
    FRONT_OF_QUEUE_FIELD_NUMBER: _ClassVar[int]
    QUOTA_SHARES_FIELD_NUMBER: _ClassVar[int]
    LAST_UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    TOTAL_CAPACITY_USAGE_FIELD_NUMBER: _ClassVar[int]
    job_queue_name: str
    front_of_queue: _containers.RepeatedCompositeFieldContainer[FrontOfQueueJob]
    quota_shares: _containers.RepeatedCompositeFieldContainer[QuotaShareSnapshot]
    last_updated_at: int
    total_capacity_usage: _containers.RepeatedCompositeFieldContainer[CapacityUsage]
    def __init__(self, job_queue_name: _Optional[str] = ..., front_of_queue: _Optional[_Iterable[_Union[FrontOfQueueJob, _Mapping]]] = ..., quota_shares: _Optional[_Iterable[_Union[QuotaShareSnapshot, _Mapping]]] = ..., last_updated_at: _Optional[int] = ..., total_capacity_usage: _Optional[_Iterable[_Union[CapacityUsage, _Mapping]]] = ...) -> None: ...

class ResourceSharingConfiguration(_message.Message):
    __slots__ = ("strategy", "borrow_limit")
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    BORROW_LIMIT_FIELD_NUMBER: _ClassVar[int]
    strategy: SharingStrategy
    borrow_limit: int
    def __init__(self, strategy: _Optional[_Union[SharingStrategy, str]] = ..., borrow_limit: _Optional[int] = ...) -> None: ...

class QuotaSharePreemptionConfiguration(_message.Message):
    __slots__ = ("in_share_preemption",)
    IN_SHARE_PREEMPTION_FIELD_NUMBER: _ClassVar[int]
    in_share_preemption: InSharePreemption
    def __init__(self, in_share_preemption: _Optional[_Union[InSharePreemption, str]] = ...) -> None: ...

class QuotaShareDetail(_message.Message):
    __slots__ = ("job_queue", "quota_share_name", "quota_share_arn", "capacity_limits", "resource_sharing_configuration", "preemption_configuration", "state", "created_at", "tags", "status", "status_reason")
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    JOB_QUEUE_FIELD_NUMBER: _ClassVar[int]
    QUOTA_SHARE_NAME_FIELD_NUMBER: _ClassVar[int]
    QUOTA_SHARE_ARN_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_LIMITS_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_SHARING_CONFIGURATION_FIELD_NUMBER: _ClassVar[int]
    PREEMPTION_CONFIGURATION_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    STATUS_REASON_FIELD_NUMBER: _ClassVar[int]
    job_queue: str
    quota_share_name: str
    quota_share_arn: str
    capacity_limits: _containers.RepeatedCompositeFieldContainer[CapacityLimit]
    resource_sharing_configuration: ResourceSharingConfiguration
    preemption_configuration: QuotaSharePreemptionConfiguration
    state: QuotaShareState
    created_at: int
    tags: _containers.ScalarMap[str, str]
    status: ResourceStatus
    status_reason: str
    def __init__(self, job_queue: _Optional[str] = ..., quota_share_name: _Optional[str] = ..., quota_share_arn: _Optional[str] = ..., capacity_limits: _Optional[_Iterable[_Union[CapacityLimit, _Mapping]]] = ..., resource_sharing_configuration: _Optional[_Union[ResourceSharingConfiguration, _Mapping]] = ..., preemption_configuration: _Optional[_Union[QuotaSharePreemptionConfiguration, _Mapping]] = ..., state: _Optional[_Union[QuotaShareState, str]] = ..., created_at: _Optional[int] = ..., tags: _Optional[_Mapping[str, str]] = ..., status: _Optional[_Union[ResourceStatus, str]] = ..., status_reason: _Optional[str] = ...) -> None: ...

class CreateQuotaShareRequest(_message.Message):
    __slots__ = ("job_queue", "quota_share_name", "capacity_limits", "resource_sharing_configuration", "preemption_configuration", "state", "tags")
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    JOB_QUEUE_FIELD_NUMBER: _ClassVar[int]
    QUOTA_SHARE_NAME_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_LIMITS_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_SHARING_CONFIGURATION_FIELD_NUMBER: _ClassVar[int]
    PREEMPTION_CONFIGURATION_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    job_queue: str
    quota_share_name: str
    capacity_limits: _containers.RepeatedCompositeFieldContainer[CapacityLimit]
    resource_sharing_configuration: ResourceSharingConfiguration
    preemption_configuration: QuotaSharePreemptionConfiguration
    state: QuotaShareState
    tags: _containers.ScalarMap[str, str]
    def __init__(self, job_queue: _Optional[str] = ..., quota_share_name: _Optional[str] = ..., capacity_limits: _Optional[_Iterable[_Union[CapacityLimit, _Mapping]]] = ..., resource_sharing_configuration: _Optional[_Union[ResourceSharingConfiguration, _Mapping]] = ..., preemption_configuration: _Optional[_Union[QuotaSharePreemptionConfiguration, _Mapping]] = ..., state: _Optional[_Union[QuotaShareState, str]] = ..., tags: _Optional[_Mapping[str, str]] = ...) -> None: ...

class CreateQuotaShareResponse(_message.Message):
    __slots__ = ("job_queue", "quota_share_name", "quota_share_arn")
    JOB_QUEUE_FIELD_NUMBER: _ClassVar[int]
    QUOTA_SHARE_NAME_FIELD_NUMBER: _ClassVar[int]
    QUOTA_SHARE_ARN_FIELD_NUMBER: _ClassVar[int]
    job_queue: str
    quota_share_name: str
    quota_share_arn: str
    def __init__(self, job_queue: _Optional[str] = ..., quota_share_name: _Optional[str] = ..., quota_share_arn: _Optional[str] = ...) -> None: ...

class UpdateQuotaShareRequest(_message.Message):
    __slots__ = ("job_queue", "quota_share_name", "capacity_limits", "resource_sharing_configuration", "preemption_configuration", "state", "quota_share_arn")
    JOB_QUEUE_FIELD_NUMBER: _ClassVar[int]
    QUOTA_SHARE_NAME_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_LIMITS_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_SHARING_CONFIGURATION_FIELD_NUMBER: _ClassVar[int]
    PREEMPTION_CONFIGURATION_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    QUOTA_SHARE_ARN_FIELD_NUMBER: _ClassVar[int]
    job_queue: str
    quota_share_name: str
    capacity_limits: _containers.RepeatedCompositeFieldContainer[CapacityLimit]
    resource_sharing_configuration: ResourceSharingConfiguration
    preemption_configuration: QuotaSharePreemptionConfiguration
    state: QuotaShareState
    quota_share_arn: str
    def __init__(self, job_queue: _Optional[str] = ..., quota_share_name: _Optional[str] = ..., capacity_limits: _Optional[_Iterable[_Union[CapacityLimit, _Mapping]]] = ..., resource_sharing_configuration: _Optional[_Union[ResourceSharingConfiguration, _Mapping]] = ..., preemption_configuration: _Optional[_Union[QuotaSharePreemptionConfiguration, _Mapping]] = ..., state: _Optional[_Union[QuotaShareState, str]] = ..., quota_share_arn: _Optional[str] = ...) -> None: ...

class UpdateQuotaShareResponse(_message.Message):
    __slots__ = ("job_queue", "quota_share_name", "quota_share_arn")
    JOB_QUEUE_FIELD_NUMBER: _ClassVar[int]
    QUOTA_SHARE_NAME_FIELD_NUMBER: _ClassVar[int]
    QUOTA_SHARE_ARN_FIELD_NUMBER: _ClassVar[int]
    job_queue: str
    quota_share_name: str
    quota_share_arn: str
    def __init__(self, job_queue: _Optional[str] = ..., quota_share_name: _Optional[str] = ..., quota_share_arn: _Optional[str] = ...) -> None: ...

class DeleteQuotaShareRequest(_message.Message):
    __slots__ = ("job_queue", "quota_share_name", "quota_share_arn")
    JOB_QUEUE_FIELD_NUMBER: _ClassVar[int]
    QUOTA_SHARE_NAME_FIELD_NUMBER: _ClassVar[int]
    QUOTA_SHARE_ARN_FIELD_NUMBER: _ClassVar[int]
    job_queue: str
    quota_share_name: str
    quota_share_arn: str
    def __init__(self, job_queue: _Optional[str] = ..., quota_share_name: _Optional[str] = ..., quota_share_arn: _Optional[str] = ...) -> None: ...

class DeleteQuotaShareResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeQuotaShareRequest(_message.Message):
    __slots__ = ("job_queue", "quota_share_name", "quota_share_arn")
    JOB_QUEUE_FIELD_NUMBER: _ClassVar[int]
    QUOTA_SHARE_NAME_FIELD_NUMBER: _ClassVar[int]
    QUOTA_SHARE_ARN_FIELD_NUMBER: _ClassVar[int]
    job_queue: str
    quota_share_name: str
    quota_share_arn: str
    def __init__(self, job_queue: _Optional[str] = ..., quota_share_name: _Optional[str] = ..., quota_share_arn: _Optional[str] = ...) -> None: ...

class DescribeQuotaShareResponse(_message.Message):
    __slots__ = ("quota_share", "oversubscribed", "capacity_usage")
    QUOTA_SHARE_FIELD_NUMBER: _ClassVar[int]
    OVERSUBSCRIBED_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_USAGE_FIELD_NUMBER: _ClassVar[int]
    quota_share: QuotaShareDetail
    oversubscribed: bool
    capacity_usage: _containers.RepeatedCompositeFieldContainer[ShareCapacityUsage]
    def __init__(self, quota_share: _Optional[_Union[QuotaShareDetail, _Mapping]] = ..., oversubscribed: _Optional[bool] = ..., capacity_usage: _Optional[_Iterable[_Union[ShareCapacityUsage, _Mapping]]] = ...) -> None: ...

class ListQuotaSharesRequest(_message.Message):
    __slots__ = ("job_queue", "max_results", "next_token")
    JOB_QUEUE_FIELD_NUMBER: _ClassVar[int]
    MAX_RESULTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    job_queue: str
    max_results: int
    next_token: str
    def __init__(self, job_queue: _Optional[str] = ..., max_results: _Optional[int] = ..., next_token: _Optional[str] = ...) -> None: ...

class ListQuotaSharesResponse(_message.Message):
    __slots__ = ("quota_shares", "next_token")
    QUOTA_SHARES_FIELD_NUMBER: _ClassVar[int]
    NEXT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    quota_shares: _containers.RepeatedCompositeFieldContainer[QuotaShareDetail]
    next_token: str
    def __init__(self, quota_shares: _Optional[_Iterable[_Union[QuotaShareDetail, _Mapping]]] = ..., next_token: _Optional[str] = ...) -> None: ...

class ServiceJobEvaluateOnExit(_message.Message):
    __slots__ = ("action", "on_status_reason", "on_exit_code", "on_reason")
    ACTION_FIELD_NUMBER: _ClassVar[int]
    ON_STATUS_REASON_FIELD_NUMBER: _ClassVar[int]
    ON_EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    ON_REASON_FIELD_NUMBER: _ClassVar[int]
    action: RetryAction
    on_status_reason: str
    on_exit_code: str
    on_reason: str
    def __init__(self, action: _Optional[_Union[RetryAction, str]] = ..., on_status_reason: _Optional[str] = ..., on_exit_code: _Optional[str] = ..., on_reason: _Optional[str] = ...) -> None: ...

class ServiceJobRetryStrategy(_message.Message):
    __slots__ = ("attempts", "evaluate_on_exit")
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    EVALUATE_ON_EXIT_FIELD_NUMBER: _ClassVar[int]
    attempts: int
    evaluate_on_exit: _containers.RepeatedCompositeFieldContainer[ServiceJobEvaluateOnExit]
    def __init__(self, attempts: _Optional[int] = ..., evaluate_on_exit: _Optional[_Iterable[_Union[ServiceJobEvaluateOnExit, _Mapping]]] = ...) -> None: ...

class ServiceJobPreemptionConfiguration(_message.Message):
    __slots__ = ("preemption_retries_before_termination",)
    PREEMPTION_RETRIES_BEFORE_TERMINATION_FIELD_NUMBER: _ClassVar[int]
    preemption_retries_before_termination: int
    def __init__(self, preemption_retries_before_termination: _Optional[int] = ...) -> None: ...

class ServiceJobTimeout(_message.Message):
    __slots__ = ("attempt_duration_seconds",)
    ATTEMPT_DURATION_SECONDS_FIELD_NUMBER: _ClassVar[int]
    attempt_duration_seconds: int
    def __init__(self, attempt_duration_seconds: _Optional[int] = ...) -> None: ...

class SubmitServiceJobRequest(_message.Message):
    __slots__ = ("job_name", "job_queue", "quota_share_name", "service_job_type", "service_request_payload", "scheduling_priority", "retry_strategy", "preemption_configuration", "timeout_config", "tags", "client_token", "dry_run")
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    JOB_NAME_FIELD_NUMBER: _ClassVar[int]
    JOB_QUEUE_FIELD_NUMBER: _ClassVar[int]
    QUOTA_SHARE_NAME_FIELD_NUMBER: _ClassVar[int]
    SERVICE_JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    SERVICE_REQUEST_PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    SCHEDULING_PRIORITY_FIELD_NUMBER: _ClassVar[int]
    RETRY_STRATEGY_FIELD_NUMBER: _ClassVar[int]
    PREEMPTION_CONFIGURATION_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_CONFIG_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    job_name: str
    job_queue: str
    quota_share_name: str
    service_job_type: str
    service_request_payload: str
    scheduling_priority: int
    retry_strategy: ServiceJobRetryStrategy
    preemption_configuration: ServiceJobPreemptionConfiguration
    timeout_config: ServiceJobTimeout
    tags: _containers.ScalarMap[str, str]
    client_token: str
    dry_run: bool
    def __init__(self, job_name: _Optional[str] = ..., job_queue: _Optional[str] = ..., quota_share_name: _Optional[str] = ..., service_job_type: _Optional[str] = ..., service_request_payload: _Optional[str] = ..., scheduling_priority: _Optional[int] = ..., retry_strategy: _Optional[_Union[ServiceJobRetryStrategy, _Mapping]] = ..., preemption_configuration: _Optional[_Union[ServiceJobPreemptionConfiguration, _Mapping]] = ..., timeout_config: _Optional[_Union[ServiceJobTimeout, _Mapping]] = ..., tags: _Optional[_Mapping[str, str]] = ..., client_token: _Optional[str] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class DryRunResult(_message.Message):
    __slots__ = ("would_start", "host_ids", "warm_pool_job_id", "rule", "preempted_job_ids", "terminated_warm_pool_job_ids", "wait_reason")
    WOULD_START_FIELD_NUMBER: _ClassVar[int]
    HOST_IDS_FIELD_NUMBER: _ClassVar[int]
    WARM_POOL_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    PREEMPTED_JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    TERMINATED_WARM_POOL_JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    WAIT_REASON_FIELD_NUMBER: _ClassVar[int]
    would_start: bool
    host_ids: _containers.RepeatedScalarFieldContainer[str]
    warm_pool_job_id: str
    rule: str
    preempted_job_ids: _containers.RepeatedScalarFieldContainer[str]
    terminated_warm_pool_job_ids: _containers.RepeatedScalarFieldContainer[str]
    wait_reason: WaitReason
    def __init__(self, would_start: _Optional[bool] = ..., host_ids: _Optional[_Iterable[str]] = ..., warm_pool_job_id: _Optional[str] = ..., rule: _Optional[str] = ..., preempted_job_ids: _Optional[_Iterable[str]] = ..., terminated_warm_pool_job_ids: _Optional[_Iterable[str]] = ..., wait_reason: _Optional[_Union[WaitReason, _Mapping]] = ...) -> None: ...

class SubmitServiceJobResponse(_message.Message):
    __slots__ = ("job_id", "job_name", "job_arn", "dry_run_result")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_NAME_FIELD_NUMBER: _ClassVar[int]
    JOB_ARN_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_RESULT_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_name: str
    job_arn: str
    dry_run_result: DryRunResult
    def __init__(self, job_id: _Optional[str] = ..., job_name: _Optional[str] = ..., job_arn: _Optional[str] = ..., dry_run_result: _Optional[_Union[DryRunResult, _Mapping]] = ...) -> None: ...

class SubmitServiceJobsRequest(_message.Message):
    __slots__ = ("jobs",)
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[SubmitServiceJobRequest]
    def __init__(self, jobs: _Optional[_Iterable[_Union[SubmitServiceJobRequest, _Mapping]]] = ...) -> None: ...

class SubmitServiceJobResult(_message.Message):
    __slots__ = ("index", "job", "error")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    index: int
    job: SubmitServiceJobResponse
    error: ApiError
    def __init__(self, index: _Optional[int] = ..., job: _Optional[_Union[SubmitServiceJobResponse, _Mapping]] = ..., error: _Optional[_Union[ApiError, _Mapping]] = ...) -> None: ...

class SubmitServiceJobsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[SubmitServiceJobResult]
    def __init__(self, results: _Optional[_Iterable[_Union[SubmitServiceJobResult, _Mapping]]] = ...) -> None: ...

class UpdateServiceJobRequest(_message.Message):
    __slots__ = ("job_id", "scheduling_priority")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEDULING_PRIORITY_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    scheduling_priority: int
    def __init__(self, job_id: _Optional[str] = ..., scheduling_priority: _Optional[int] = ...) -> None: ...

class UpdateServiceJobResponse(_message.Message):
    __slots__ = ("job_id", "job_name", "job_arn")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_NAME_FIELD_NUMBER: _ClassVar[int]
    JOB_ARN_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_name: str
    job_arn: str
    def __init__(self, job_id: _Optional[str] = ..., job_name: _Optional[str] = ..., job_arn: _Optional[str] = ...) -> None: ...

class TerminateServiceJobRequest(_message.Message):
    __slots__ = ("job_id", "reason")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    reason: str
    def __init__(self, job_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class TerminateServiceJobResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeServiceJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class ServiceJobAttemptDetail(_message.Message):
    __slots__ = ("host_ids", "started_at", "stopped_at", "status_reason", "exit_code", "start_phases", "training_job_name", "training_job_arn", "model_artifacts", "lost_unit_seconds", "service_resource_id")
    HOST_IDS_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    STOPPED_AT_FIELD_NUMBER: _ClassVar[int]
    STATUS_REASON_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    START_PHASES_FIELD_NUMBER: _ClassVar[int]
    TRAINING_JOB_NAME_FIELD_NUMBER: _ClassVar[int]
    TRAINING_JOB_ARN_FIELD_NUMBER: _ClassVar[int]
    MODEL_ARTIFACTS_FIELD_NUMBER: _ClassVar[int]
    LOST_UNIT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SERVICE_RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    host_ids: _containers.RepeatedScalarFieldContainer[str]
    started_at: int
    stopped_at: int
    status_reason: str
    exit_code: int
    start_phases: AttemptStartPhases
    training_job_name: str
    training_job_arn: str
    model_artifacts: str
    lost_unit_seconds: float
    service_resource_id: ServiceResourceId
    def __init__(self, host_ids: _Optional[_Iterable[str]] = ..., started_at: _Optional[int] = ..., stopped_at: _Optional[int] = ..., status_reason: _Optional[str] = ..., exit_code: _Optional[int] = ..., start_phases: _Optional[_Union[AttemptStartPhases, _Mapping]] = ..., training_job_name: _Optional[str] = ..., training_job_arn: _Optional[str] = ..., model_artifacts: _Optional[str] = ..., lost_unit_seconds: _Optional[float] = ..., service_resource_id: _Optional[_Union[ServiceResourceId, _Mapping]] = ...) -> None: ...

class ServiceResourceId(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class AttemptStartPhases(_message.Message):
    __slots__ = ("pull_seconds", "volume_seconds", "staging_seconds", "container_seconds", "warm")
    PULL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    VOLUME_SECONDS_FIELD_NUMBER: _ClassVar[int]
    STAGING_SECONDS_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_SECONDS_FIELD_NUMBER: _ClassVar[int]
    WARM_FIELD_NUMBER: _ClassVar[int]
    pull_seconds: float
    volume_seconds: float
    staging_seconds: float
    container_seconds: float
    warm: bool
    def __init__(self, pull_seconds: _Optional[float] = ..., volume_seconds: _Optional[float] = ..., staging_seconds: _Optional[float] = ..., container_seconds: _Optional[float] = ..., warm: _Optional[bool] = ...) -> None: ...

class ServiceJobPreemptionSummary(_message.Message):
    __slots__ = ("preempted_attempt_count", "recent_preempted_attempts", "lost_unit_seconds")
    PREEMPTED_ATTEMPT_COUNT_FIELD_NUMBER: _ClassVar[int]
    RECENT_PREEMPTED_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    LOST_UNIT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    preempted_attempt_count: int
    recent_preempted_attempts: _containers.RepeatedCompositeFieldContainer[ServiceJobAttemptDetail]
    lost_unit_seconds: float
    def __init__(self, preempted_attempt_count: _Optional[int] = ..., recent_preempted_attempts: _Optional[_Iterable[_Union[ServiceJobAttemptDetail, _Mapping]]] = ..., lost_unit_seconds: _Optional[float] = ...) -> None: ...

class WarmPoolStatusDetail(_message.Message):
    __slots__ = ("status", "resource_retained_billable_time_in_seconds", "reused_by_job")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_RETAINED_BILLABLE_TIME_IN_SECONDS_FIELD_NUMBER: _ClassVar[int]
    REUSED_BY_JOB_FIELD_NUMBER: _ClassVar[int]
    status: WarmPoolStatus
    resource_retained_billable_time_in_seconds: int
    reused_by_job: str
    def __init__(self, status: _Optional[_Union[WarmPoolStatus, str]] = ..., resource_retained_billable_time_in_seconds: _Optional[int] = ..., reused_by_job: _Optional[str] = ...) -> None: ...

class ServiceJobDetail(_message.Message):
    __slots__ = ("job_id", "job_name", "job_arn", "job_queue", "quota_share_name", "service_job_type", "status", "status_reason", "scheduling_priority", "created_at", "started_at", "stopped_at", "is_terminated", "attempts", "preemption_summary", "capacity_usage", "warm_pool_status", "retry_strategy", "preemption_configuration", "timeout_config", "tags", "service_request_payload", "submitted_by", "priority_updated_by", "terminated_by", "wait_reason", "latest_attempt", "scheduled_at")
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_NAME_FIELD_NUMBER: _ClassVar[int]
    JOB_ARN_FIELD_NUMBER: _ClassVar[int]
    JOB_QUEUE_FIELD_NUMBER: _ClassVar[int]
    QUOTA_SHARE_NAME_FIELD_NUMBER: _ClassVar[int]
    SERVICE_JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    STATUS_REASON_FIELD_NUMBER: _ClassVar[int]
    SCHEDULING_PRIORITY_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    STOPPED_AT_FIELD_NUMBER: _ClassVar[int]
    IS_TERMINATED_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    PREEMPTION_SUMMARY_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_USAGE_FIELD_NUMBER: _ClassVar[int]
    WARM_POOL_STATUS_FIELD_NUMBER: _ClassVar[int]
    RETRY_STRATEGY_FIELD_NUMBER: _ClassVar[int]
    PREEMPTION_CONFIGURATION_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_CONFIG_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    SERVICE_REQUEST_PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    SUBMITTED_BY_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_UPDATED_BY_FIELD_NUMBER: _ClassVar[int]
    TERMINATED_BY_FIELD_NUMBER: _ClassVar[int]
    WAIT_REASON_FIELD_NUMBER: _ClassVar[int]
    LATEST_ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_AT_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_name: str
    job_arn: str
    job_queue: str
    quota_share_name: str
    service_job_type: str
    status: JobStatus
    status_reason: str
    scheduling_priority: int
    created_at: int
    started_at: int
    stopped_at: int
    is_terminated: bool
    attempts: _containers.RepeatedCompositeFieldContainer[ServiceJobAttemptDetail]
    preemption_summary: ServiceJobPreemptionSummary
    capacity_usage: _containers.RepeatedCompositeFieldContainer[CapacityUsage]
    warm_pool_status: WarmPoolStatusDetail
    retry_strategy: ServiceJobRetryStrategy
    preemption_configuration: ServiceJobPreemptionConfiguration
    timeout_config: ServiceJobTimeout
    tags: _containers.ScalarMap[str, str]
    service_request_payload: str
    submitted_by: str
    priority_updated_by: str
    terminated_by: str
    wait_reason: WaitReason
    latest_attempt: ServiceJobAttemptDetail
    scheduled_at: int
    def __init__(self, job_id: _Optional[str] = ..., job_name: _Optional[str] = ..., job_arn: _Optional[str] = ..., job_queue: _Optional[str] = ..., quota_share_name: _Optional[str] = ..., service_job_type: _Optional[str] = ..., status: _Optional[_Union[JobStatus, str]] = ..., status_reason: _Optional[str] = ..., scheduling_priority: _Optional[int] = ..., created_at: _Optional[int] = ..., started_at: _Optional[int] = ..., stopped_at: _Optional[int] = ..., is_terminated: _Optional[bool] = ..., attempts: _Optional[_Iterable[_Union[ServiceJobAttemptDetail, _Mapping]]] = ..., preemption_summary: _Optional[_Union[ServiceJobPreemptionSummary, _Mapping]] = ..., capacity_usage: _Optional[_Iterable[_Union[CapacityUsage, _Mapping]]] = ..., warm_pool_status: _Optional[_Union[WarmPoolStatusDetail, _Mapping]] = ..., retry_strategy: _Optional[_Union[ServiceJobRetryStrategy, _Mapping]] = ..., preemption_configuration: _Optional[_Union[ServiceJobPreemptionConfiguration, _Mapping]] = ..., timeout_config: _Optional[_Union[ServiceJobTimeout, _Mapping]] = ..., tags: _Optional[_Mapping[str, str]] = ..., service_request_payload: _Optional[str] = ..., submitted_by: _Optional[str] = ..., priority_updated_by: _Optional[str] = ..., terminated_by: _Optional[str] = ..., wait_reason: _Optional[_Union[WaitReason, _Mapping]] = ..., latest_attempt: _Optional[_Union[ServiceJobAttemptDetail, _Mapping]] = ..., scheduled_at: _Optional[int] = ...) -> None: ...

class DescribeServiceJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: ServiceJobDetail
    def __init__(self, job: _Optional[_Union[ServiceJobDetail, _Mapping]] = ...) -> None: ...

class ListServiceJobsRequest(_message.Message):
    __slots__ = ("job_queue", "quota_share_name", "job_status", "filters", "max_results", "next_token", "all_statuses")
    JOB_QUEUE_FIELD_NUMBER: _ClassVar[int]
    QUOTA_SHARE_NAME_FIELD_NUMBER: _ClassVar[int]
    JOB_STATUS_FIELD_NUMBER: _ClassVar[int]
    FILTERS_FIELD_NUMBER: _ClassVar[int]
    MAX_RESULTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ALL_STATUSES_FIELD_NUMBER: _ClassVar[int]
    job_queue: str
    quota_share_name: str
    job_status: JobStatus
    filters: _containers.RepeatedCompositeFieldContainer[KeyValuesPair]
    max_results: int
    next_token: str
    all_statuses: bool
    def __init__(self, job_queue: _Optional[str] = ..., quota_share_name: _Optional[str] = ..., job_status: _Optional[_Union[JobStatus, str]] = ..., filters: _Optional[_Iterable[_Union[KeyValuesPair, _Mapping]]] = ..., max_results: _Optional[int] = ..., next_token: _Optional[str] = ..., all_statuses: _Optional[bool] = ...) -> None: ...

class ServiceJobSummary(_message.Message):
    __slots__ = ("job_id", "job_name", "job_arn", "job_queue", "quota_share_name", "service_job_type", "status", "status_reason", "scheduling_priority", "created_at", "started_at", "stopped_at", "capacity_usage", "wait_reason", "latest_attempt", "scheduled_at")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_NAME_FIELD_NUMBER: _ClassVar[int]
    JOB_ARN_FIELD_NUMBER: _ClassVar[int]
    JOB_QUEUE_FIELD_NUMBER: _ClassVar[int]
    QUOTA_SHARE_NAME_FIELD_NUMBER: _ClassVar[int]
    SERVICE_JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    STATUS_REASON_FIELD_NUMBER: _ClassVar[int]
    SCHEDULING_PRIORITY_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    STOPPED_AT_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_USAGE_FIELD_NUMBER: _ClassVar[int]
    WAIT_REASON_FIELD_NUMBER: _ClassVar[int]
    LATEST_ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_AT_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_name: str
    job_arn: str
    job_queue: str
    quota_share_name: str
    service_job_type: str
    status: JobStatus
    status_reason: str
    scheduling_priority: int
    created_at: int
    started_at: int
    stopped_at: int
    capacity_usage: _containers.RepeatedCompositeFieldContainer[CapacityUsage]
    wait_reason: WaitReason
    latest_attempt: ServiceJobAttemptDetail
    scheduled_at: int
    def __init__(self, job_id: _Optional[str] = ..., job_name: _Optional[str] = ..., job_arn: _Optional[str] = ..., job_queue: _Optional[str] = ..., quota_share_name: _Optional[str] = ..., service_job_type: _Optional[str] = ..., status: _Optional[_Union[JobStatus, str]] = ..., status_reason: _Optional[str] = ..., scheduling_priority: _Optional[int] = ..., created_at: _Optional[int] = ..., started_at: _Optional[int] = ..., stopped_at: _Optional[int] = ..., capacity_usage: _Optional[_Iterable[_Union[CapacityUsage, _Mapping]]] = ..., wait_reason: _Optional[_Union[WaitReason, _Mapping]] = ..., latest_attempt: _Optional[_Union[ServiceJobAttemptDetail, _Mapping]] = ..., scheduled_at: _Optional[int] = ...) -> None: ...

class ListServiceJobsResponse(_message.Message):
    __slots__ = ("job_summary_list", "next_token")
    JOB_SUMMARY_LIST_FIELD_NUMBER: _ClassVar[int]
    NEXT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    job_summary_list: _containers.RepeatedCompositeFieldContainer[ServiceJobSummary]
    next_token: str
    def __init__(self, job_summary_list: _Optional[_Iterable[_Union[ServiceJobSummary, _Mapping]]] = ..., next_token: _Optional[str] = ...) -> None: ...

class WatchServiceJobsRequest(_message.Message):
    __slots__ = ("job_queue", "quota_share_name", "job_ids", "after_sequence", "statuses")
    JOB_QUEUE_FIELD_NUMBER: _ClassVar[int]
    QUOTA_SHARE_NAME_FIELD_NUMBER: _ClassVar[int]
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    STATUSES_FIELD_NUMBER: _ClassVar[int]
    job_queue: str
    quota_share_name: str
    job_ids: _containers.RepeatedScalarFieldContainer[str]
    after_sequence: int
    statuses: _containers.RepeatedScalarFieldContainer[JobStatus]
    def __init__(self, job_queue: _Optional[str] = ..., quota_share_name: _Optional[str] = ..., job_ids: _Optional[_Iterable[str]] = ..., after_sequence: _Optional[int] = ..., statuses: _Optional[_Iterable[_Union[JobStatus, str]]] = ...) -> None: ...

class JobStateChange(_message.Message):
    __slots__ = ("job_id", "job_name", "job_queue", "quota_share_name", "status", "status_reason", "sequence", "at")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_NAME_FIELD_NUMBER: _ClassVar[int]
    JOB_QUEUE_FIELD_NUMBER: _ClassVar[int]
    QUOTA_SHARE_NAME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    STATUS_REASON_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_name: str
    job_queue: str
    quota_share_name: str
    status: JobStatus
    status_reason: str
    sequence: int
    at: int
    def __init__(self, job_id: _Optional[str] = ..., job_name: _Optional[str] = ..., job_queue: _Optional[str] = ..., quota_share_name: _Optional[str] = ..., status: _Optional[_Union[JobStatus, str]] = ..., status_reason: _Optional[str] = ..., sequence: _Optional[int] = ..., at: _Optional[int] = ...) -> None: ...

class ExplainServiceJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class ExplainedShareUsage(_message.Message):
    __slots__ = ("quota_share_name", "strategy", "usage", "stopping")
    QUOTA_SHARE_NAME_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    STOPPING_FIELD_NUMBER: _ClassVar[int]
    quota_share_name: str
    strategy: SharingStrategy
    usage: ShareCapacityUsage
    stopping: int
    def __init__(self, quota_share_name: _Optional[str] = ..., strategy: _Optional[_Union[SharingStrategy, str]] = ..., usage: _Optional[_Union[ShareCapacityUsage, _Mapping]] = ..., stopping: _Optional[int] = ...) -> None: ...

class ExplainedCandidate(_message.Message):
    __slots__ = ("job_id", "job_name", "quota_share_name", "scheduling_priority", "dispatched_at", "chosen", "why", "seconds_at_risk")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_NAME_FIELD_NUMBER: _ClassVar[int]
    QUOTA_SHARE_NAME_FIELD_NUMBER: _ClassVar[int]
    SCHEDULING_PRIORITY_FIELD_NUMBER: _ClassVar[int]
    DISPATCHED_AT_FIELD_NUMBER: _ClassVar[int]
    CHOSEN_FIELD_NUMBER: _ClassVar[int]
    WHY_FIELD_NUMBER: _ClassVar[int]
    SECONDS_AT_RISK_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_name: str
    quota_share_name: str
    scheduling_priority: int
    dispatched_at: int
    chosen: bool
    why: str
    seconds_at_risk: float
    def __init__(self, job_id: _Optional[str] = ..., job_name: _Optional[str] = ..., quota_share_name: _Optional[str] = ..., scheduling_priority: _Optional[int] = ..., dispatched_at: _Optional[int] = ..., chosen: _Optional[bool] = ..., why: _Optional[str] = ..., seconds_at_risk: _Optional[float] = ...) -> None: ...

class ExplainedDecision(_message.Message):
    __slots__ = ("rule", "reason", "inputs", "for_job_id", "candidates")
    class InputsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    RULE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    FOR_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    rule: str
    reason: str
    inputs: _containers.ScalarMap[str, str]
    for_job_id: str
    candidates: _containers.RepeatedCompositeFieldContainer[ExplainedCandidate]
    def __init__(self, rule: _Optional[str] = ..., reason: _Optional[str] = ..., inputs: _Optional[_Mapping[str, str]] = ..., for_job_id: _Optional[str] = ..., candidates: _Optional[_Iterable[_Union[ExplainedCandidate, _Mapping]]] = ...) -> None: ...

class ExplainedTransition(_message.Message):
    __slots__ = ("sequence", "at", "event_type", "source", "from_status", "to_status", "status_reason", "summary", "decision", "decision_sequence", "share_usage")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    FROM_STATUS_FIELD_NUMBER: _ClassVar[int]
    TO_STATUS_FIELD_NUMBER: _ClassVar[int]
    STATUS_REASON_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    DECISION_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    SHARE_USAGE_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    at: int
    event_type: str
    source: str
    from_status: JobStatus
    to_status: JobStatus
    status_reason: str
    summary: str
    decision: ExplainedDecision
    decision_sequence: int
    share_usage: _containers.RepeatedCompositeFieldContainer[ExplainedShareUsage]
    def __init__(self, sequence: _Optional[int] = ..., at: _Optional[int] = ..., event_type: _Optional[str] = ..., source: _Optional[str] = ..., from_status: _Optional[_Union[JobStatus, str]] = ..., to_status: _Optional[_Union[JobStatus, str]] = ..., status_reason: _Optional[str] = ..., summary: _Optional[str] = ..., decision: _Optional[_Union[ExplainedDecision, _Mapping]] = ..., decision_sequence: _Optional[int] = ..., share_usage: _Optional[_Iterable[_Union[ExplainedShareUsage, _Mapping]]] = ...) -> None: ...

class ExplainServiceJobResponse(_message.Message):
    __slots__ = ("job_id", "job_name", "job_queue", "quota_share_name", "status", "status_reason", "sequence", "transitions", "waiting_reason")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_NAME_FIELD_NUMBER: _ClassVar[int]
    JOB_QUEUE_FIELD_NUMBER: _ClassVar[int]
    QUOTA_SHARE_NAME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    STATUS_REASON_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    TRANSITIONS_FIELD_NUMBER: _ClassVar[int]
    WAITING_REASON_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_name: str
    job_queue: str
    quota_share_name: str
    status: JobStatus
    status_reason: str
    sequence: int
    transitions: _containers.RepeatedCompositeFieldContainer[ExplainedTransition]
    waiting_reason: str
    def __init__(self, job_id: _Optional[str] = ..., job_name: _Optional[str] = ..., job_queue: _Optional[str] = ..., quota_share_name: _Optional[str] = ..., status: _Optional[_Union[JobStatus, str]] = ..., status_reason: _Optional[str] = ..., sequence: _Optional[int] = ..., transitions: _Optional[_Iterable[_Union[ExplainedTransition, _Mapping]]] = ..., waiting_reason: _Optional[str] = ...) -> None: ...

class ListWarmPoolsRequest(_message.Message):
    __slots__ = ("status", "job_queue", "max_results", "next_token")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    JOB_QUEUE_FIELD_NUMBER: _ClassVar[int]
    MAX_RESULTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    status: WarmPoolStatus
    job_queue: str
    max_results: int
    next_token: str
    def __init__(self, status: _Optional[_Union[WarmPoolStatus, str]] = ..., job_queue: _Optional[str] = ..., max_results: _Optional[int] = ..., next_token: _Optional[str] = ...) -> None: ...

class WarmPoolSummary(_message.Message):
    __slots__ = ("training_job_name", "job_id", "job_queue", "quota_share_name", "status", "resource_retained_billable_time_in_seconds", "reused_by_job", "instance_type", "instance_count", "host_ids", "expires_at")
    TRAINING_JOB_NAME_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_QUEUE_FIELD_NUMBER: _ClassVar[int]
    QUOTA_SHARE_NAME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_RETAINED_BILLABLE_TIME_IN_SECONDS_FIELD_NUMBER: _ClassVar[int]
    REUSED_BY_JOB_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_COUNT_FIELD_NUMBER: _ClassVar[int]
    HOST_IDS_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    training_job_name: str
    job_id: str
    job_queue: str
    quota_share_name: str
    status: WarmPoolStatus
    resource_retained_billable_time_in_seconds: int
    reused_by_job: str
    instance_type: str
    instance_count: int
    host_ids: _containers.RepeatedScalarFieldContainer[str]
    expires_at: int
    def __init__(self, training_job_name: _Optional[str] = ..., job_id: _Optional[str] = ..., job_queue: _Optional[str] = ..., quota_share_name: _Optional[str] = ..., status: _Optional[_Union[WarmPoolStatus, str]] = ..., resource_retained_billable_time_in_seconds: _Optional[int] = ..., reused_by_job: _Optional[str] = ..., instance_type: _Optional[str] = ..., instance_count: _Optional[int] = ..., host_ids: _Optional[_Iterable[str]] = ..., expires_at: _Optional[int] = ...) -> None: ...

class ListWarmPoolsResponse(_message.Message):
    __slots__ = ("warm_pool_summaries", "next_token")
    WARM_POOL_SUMMARIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    warm_pool_summaries: _containers.RepeatedCompositeFieldContainer[WarmPoolSummary]
    next_token: str
    def __init__(self, warm_pool_summaries: _Optional[_Iterable[_Union[WarmPoolSummary, _Mapping]]] = ..., next_token: _Optional[str] = ...) -> None: ...

class UpdateWarmPoolRequest(_message.Message):
    __slots__ = ("job_id", "keep_alive_period_in_seconds")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    KEEP_ALIVE_PERIOD_IN_SECONDS_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    keep_alive_period_in_seconds: int
    def __init__(self, job_id: _Optional[str] = ..., keep_alive_period_in_seconds: _Optional[int] = ...) -> None: ...

class UpdateWarmPoolResponse(_message.Message):
    __slots__ = ("warm_pool",)
    WARM_POOL_FIELD_NUMBER: _ClassVar[int]
    warm_pool: WarmPoolSummary
    def __init__(self, warm_pool: _Optional[_Union[WarmPoolSummary, _Mapping]] = ...) -> None: ...

class NodeSummary(_message.Message):
    __slots__ = ("host_id", "instance_type", "gpu_count", "service_environment", "state", "job_id", "last_heartbeat_at")
    HOST_ID_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    GPU_COUNT_FIELD_NUMBER: _ClassVar[int]
    SERVICE_ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_AT_FIELD_NUMBER: _ClassVar[int]
    host_id: str
    instance_type: str
    gpu_count: int
    service_environment: str
    state: NodeState
    job_id: str
    last_heartbeat_at: int
    def __init__(self, host_id: _Optional[str] = ..., instance_type: _Optional[str] = ..., gpu_count: _Optional[int] = ..., service_environment: _Optional[str] = ..., state: _Optional[_Union[NodeState, str]] = ..., job_id: _Optional[str] = ..., last_heartbeat_at: _Optional[int] = ...) -> None: ...

class ListNodesRequest(_message.Message):
    __slots__ = ("service_environment", "state", "max_results", "next_token")
    SERVICE_ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    MAX_RESULTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    service_environment: str
    state: NodeState
    max_results: int
    next_token: str
    def __init__(self, service_environment: _Optional[str] = ..., state: _Optional[_Union[NodeState, str]] = ..., max_results: _Optional[int] = ..., next_token: _Optional[str] = ...) -> None: ...

class ListNodesResponse(_message.Message):
    __slots__ = ("nodes", "next_token")
    NODES_FIELD_NUMBER: _ClassVar[int]
    NEXT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[NodeSummary]
    next_token: str
    def __init__(self, nodes: _Optional[_Iterable[_Union[NodeSummary, _Mapping]]] = ..., next_token: _Optional[str] = ...) -> None: ...

class DrainNodeRequest(_message.Message):
    __slots__ = ("host_id",)
    HOST_ID_FIELD_NUMBER: _ClassVar[int]
    host_id: str
    def __init__(self, host_id: _Optional[str] = ...) -> None: ...

class DrainNodeResponse(_message.Message):
    __slots__ = ("node",)
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: NodeSummary
    def __init__(self, node: _Optional[_Union[NodeSummary, _Mapping]] = ...) -> None: ...

class GetServiceJobLogsRequest(_message.Message):
    __slots__ = ("job_id", "attempt", "host_id", "follow", "offset")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    HOST_ID_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    attempt: int
    host_id: str
    follow: bool
    offset: int
    def __init__(self, job_id: _Optional[str] = ..., attempt: _Optional[int] = ..., host_id: _Optional[str] = ..., follow: _Optional[bool] = ..., offset: _Optional[int] = ...) -> None: ...

class LogChunk(_message.Message):
    __slots__ = ("job_id", "attempt", "host_id", "offset", "data", "skipped_bytes")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    HOST_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_BYTES_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    attempt: int
    host_id: str
    offset: int
    data: bytes
    skipped_bytes: int
    def __init__(self, job_id: _Optional[str] = ..., attempt: _Optional[int] = ..., host_id: _Optional[str] = ..., offset: _Optional[int] = ..., data: _Optional[bytes] = ..., skipped_bytes: _Optional[int] = ...) -> None: ...

class UndrainNodeRequest(_message.Message):
    __slots__ = ("host_id",)
    HOST_ID_FIELD_NUMBER: _ClassVar[int]
    host_id: str
    def __init__(self, host_id: _Optional[str] = ...) -> None: ...

class UndrainNodeResponse(_message.Message):
    __slots__ = ("node",)
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: NodeSummary
    def __init__(self, node: _Optional[_Union[NodeSummary, _Mapping]] = ...) -> None: ...

class DeleteServiceEnvironmentRequest(_message.Message):
    __slots__ = ("service_environment",)
    SERVICE_ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    service_environment: str
    def __init__(self, service_environment: _Optional[str] = ...) -> None: ...

class DeleteServiceEnvironmentResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SchedulingPolicyDetail(_message.Message):
    __slots__ = ("name", "arn", "quota_share_policy", "tags", "created_at")
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARN_FIELD_NUMBER: _ClassVar[int]
    QUOTA_SHARE_POLICY_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    name: str
    arn: str
    quota_share_policy: QuotaSharePolicy
    tags: _containers.ScalarMap[str, str]
    created_at: int
    def __init__(self, name: _Optional[str] = ..., arn: _Optional[str] = ..., quota_share_policy: _Optional[_Union[QuotaSharePolicy, _Mapping]] = ..., tags: _Optional[_Mapping[str, str]] = ..., created_at: _Optional[int] = ...) -> None: ...

class UpdateSchedulingPolicyRequest(_message.Message):
    __slots__ = ("arn", "quota_share_policy")
    ARN_FIELD_NUMBER: _ClassVar[int]
    QUOTA_SHARE_POLICY_FIELD_NUMBER: _ClassVar[int]
    arn: str
    quota_share_policy: QuotaSharePolicy
    def __init__(self, arn: _Optional[str] = ..., quota_share_policy: _Optional[_Union[QuotaSharePolicy, _Mapping]] = ...) -> None: ...

class UpdateSchedulingPolicyResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeSchedulingPoliciesRequest(_message.Message):
    __slots__ = ("arns",)
    ARNS_FIELD_NUMBER: _ClassVar[int]
    arns: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, arns: _Optional[_Iterable[str]] = ...) -> None: ...

class DescribeSchedulingPoliciesResponse(_message.Message):
    __slots__ = ("scheduling_policies",)
    SCHEDULING_POLICIES_FIELD_NUMBER: _ClassVar[int]
    scheduling_policies: _containers.RepeatedCompositeFieldContainer[SchedulingPolicyDetail]
    def __init__(self, scheduling_policies: _Optional[_Iterable[_Union[SchedulingPolicyDetail, _Mapping]]] = ...) -> None: ...

class ListSchedulingPoliciesRequest(_message.Message):
    __slots__ = ("max_results", "next_token")
    MAX_RESULTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    max_results: int
    next_token: str
    def __init__(self, max_results: _Optional[int] = ..., next_token: _Optional[str] = ...) -> None: ...

class SchedulingPolicyListingDetail(_message.Message):
    __slots__ = ("arn",)
    ARN_FIELD_NUMBER: _ClassVar[int]
    arn: str
    def __init__(self, arn: _Optional[str] = ...) -> None: ...

class ListSchedulingPoliciesResponse(_message.Message):
    __slots__ = ("scheduling_policies", "next_token")
    SCHEDULING_POLICIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    scheduling_policies: _containers.RepeatedCompositeFieldContainer[SchedulingPolicyListingDetail]
    next_token: str
    def __init__(self, scheduling_policies: _Optional[_Iterable[_Union[SchedulingPolicyListingDetail, _Mapping]]] = ..., next_token: _Optional[str] = ...) -> None: ...

class DeleteSchedulingPolicyRequest(_message.Message):
    __slots__ = ("arn",)
    ARN_FIELD_NUMBER: _ClassVar[int]
    arn: str
    def __init__(self, arn: _Optional[str] = ...) -> None: ...

class DeleteSchedulingPolicyResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DeleteJobQueueRequest(_message.Message):
    __slots__ = ("job_queue",)
    JOB_QUEUE_FIELD_NUMBER: _ClassVar[int]
    job_queue: str
    def __init__(self, job_queue: _Optional[str] = ...) -> None: ...

class DeleteJobQueueResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TagResourceRequest(_message.Message):
    __slots__ = ("resource_arn", "tags")
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    RESOURCE_ARN_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    resource_arn: str
    tags: _containers.ScalarMap[str, str]
    def __init__(self, resource_arn: _Optional[str] = ..., tags: _Optional[_Mapping[str, str]] = ...) -> None: ...

class TagResourceResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class UntagResourceRequest(_message.Message):
    __slots__ = ("resource_arn", "tag_keys")
    RESOURCE_ARN_FIELD_NUMBER: _ClassVar[int]
    TAG_KEYS_FIELD_NUMBER: _ClassVar[int]
    resource_arn: str
    tag_keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, resource_arn: _Optional[str] = ..., tag_keys: _Optional[_Iterable[str]] = ...) -> None: ...

class UntagResourceResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTagsForResourceRequest(_message.Message):
    __slots__ = ("resource_arn",)
    RESOURCE_ARN_FIELD_NUMBER: _ClassVar[int]
    resource_arn: str
    def __init__(self, resource_arn: _Optional[str] = ...) -> None: ...

class ListTagsForResourceResponse(_message.Message):
    __slots__ = ("tags",)
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TAGS_FIELD_NUMBER: _ClassVar[int]
    tags: _containers.ScalarMap[str, str]
    def __init__(self, tags: _Optional[_Mapping[str, str]] = ...) -> None: ...
