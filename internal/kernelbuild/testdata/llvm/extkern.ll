; A kernel named as a function the library defines and calls: the linker binds the
; library's calls to the kernel, and Triton makes the kernel internal.
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

@global_smem = external addrspace(3) global [0 x i8], align 16

define void @nvshmemi_transfer(i8* %0, i8* %1, i64 %2, i32 %3) !dbg !5 {
  call void @nvshmem_putmem(i8* %0, i8* %1, i64 %2, i32 %3), !dbg !8
  %t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x(), !dbg !8
  ret void, !dbg !8
}

declare void @nvshmem_putmem(i8*, i8*, i64, i32)
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()

!llvm.module.flags = !{!0, !1}
!llvm.dbg.cu = !{!2}
!nvvm.annotations = !{!9, !10}
!0 = !{i32 2, !"Debug Info Version", i32 3}
!1 = !{i32 4, !"nvvm-reflect-ftz", i32 1}
!2 = distinct !DICompileUnit(language: DW_LANG_C, file: !3, producer: "triton", isOptimized: true, runtimeVersion: 0, emissionKind: LineTablesOnly)
!3 = !DIFile(filename: "seed_put.py", directory: "/tmp")
!4 = !DISubroutineType(cc: DW_CC_normal, types: !{})
!5 = distinct !DISubprogram(name: "nvshmemi_transfer", linkageName: "nvshmemi_transfer", scope: !3, file: !3, line: 7, type: !4, scopeLine: 7, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !2)
!8 = !DILocation(line: 9, column: 4, scope: !5)
!9 = !{void (i8*, i8*, i64, i32)* @nvshmemi_transfer, !"kernel", i32 1}
!10 = !{void (i8*, i8*, i64, i32)* @nvshmemi_transfer, !"maxntidx", i32 128}
