; A stand-in for NVSHMEM's device library: external functions, a linkonce_odr and an
; internal one they call, a global they read, one nothing calls, named metadata.
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

@nvshmemi_device_state_d = addrspace(1) externally_initialized global [64 x i8] zeroinitializer, align 8
@unused_g = addrspace(1) global i32 0, align 4
@llvm.used = appending global [1 x i8*] [i8* bitcast (void ()* @nvshmem_unused to i8*)], section "llvm.metadata"

define void @nvshmem_putmem(i8* %d, i8* %s, i64 %n, i32 %pe) #0 {
entry:
  %st = load i8, i8 addrspace(1)* getelementptr ([64 x i8], [64 x i8] addrspace(1)* @nvshmemi_device_state_d, i64 0, i64 3), align 1
  call void @nvshmemi_transfer(i8* %d, i8* %s, i64 %n, i32 %pe, i8 %st)
  ret void
}

define linkonce_odr void @nvshmemi_transfer(i8* %d, i8* %s, i64 %n, i32 %pe, i8 %st) #0 {
entry:
  call void @helper(i8* %d, i8* %s, i64 %n)
  %r = call i32 @__nvvm_reflect(i8* null)
  ret void
}

define internal void @helper(i8* %d, i8* %s, i64 %n) #0 {
entry:
  call void @llvm.memcpy.p0i8.p0i8.i64(i8* %d, i8* %s, i64 %n, i1 false)
  ret void
}

define void @nvshmem_quiet() #0 {
  ret void
}

define void @nvshmem_unused() #0 {
  %v = load i32, i32 addrspace(1)* @unused_g
  ret void
}

declare i32 @__nvvm_reflect(i8*)
declare void @llvm.memcpy.p0i8.p0i8.i64(i8* noalias nocapture writeonly, i8* noalias nocapture readonly, i64, i1 immarg)

attributes #0 = { convergent nounwind "target-cpu"="sm_70" }

!llvm.module.flags = !{!0}
!nvvmir.version = !{!1}
!0 = !{i32 1, !"wchar_size", i32 4}
!1 = !{i32 2, i32 0}
